"""The default task's preset sits under the user's config and never breaks it."""

from __future__ import annotations

from hfsdk.core.config import load_run_config
from hfsdk.core.config.run_config import with_algorithm_preset
from hfsdk.core.default_task.preset import with_default_task_preset


def test_preset_fills_only_what_the_user_left_out() -> None:
    config = load_run_config("grpo", None, ["actor.optim.lr=0.002"])
    assert config.actor.optim.lr == 0.002  # the user's value wins
    assert config.data.batch_size == 16 and config.trainer.total_steps == 30  # preset
    assert config.actor.mini_batch_size == 32  # grpo's own preset entry


def test_no_preset_with_user_data() -> None:
    data = {"data": {"train_files": ["prompts.jsonl"]}}
    assert with_algorithm_preset("ppo", data) == data
    assert with_default_task_preset({"actor": {"optim": {"lr": 1.0}}}, data) == data


def test_sections_of_another_backend_take_no_preset_keys() -> None:
    merged = with_algorithm_preset("ppo", {"actor": {"backend": "elsewhere"}})
    assert merged["actor"] == {"backend": "elsewhere"}
    assert merged["critic"]["optim"]["lr"] == 1e-3


def test_megatron_sections_take_the_preset_keys() -> None:
    """megatron roles share the fsdp batch and optimizer keys, so the preset fits them."""
    merged = with_algorithm_preset("ppo", {"critic": {"backend": "megatron"}})
    assert merged["critic"]["backend"] == "megatron"
    assert merged["critic"]["optim"]["lr"] == 1e-3
    # The preset names the backends it was written for; the core never forces one.
    assert "backend" not in with_algorithm_preset("ppo", {})["critic"]


def test_preset_sections_follow_the_declared_default_backend() -> None:
    preset = {"actor": {"backend": "mine", "lr": 1}, "rollout": {"backend": "theirs", "n": 2}}
    merged = with_default_task_preset(preset, {}, {"actor": "mine", "rollout": "other"}.get)
    assert merged["actor"] == {"lr": 1} and "rollout" not in merged
    assert merged["trainer"]["total_steps"] == 30  # the core's own sections
    # A section may be written for several backends that share its keys.
    shared = {"rollout": {"backend": ["theirs", "other"], "n": 2}}
    merged = with_default_task_preset(shared, {}, {"rollout": "other"}.get)
    assert merged["rollout"] == {"n": 2}


def test_a_third_party_algorithm_brings_its_own_preset() -> None:
    import hfsdk

    spec = hfsdk.get_registry("algorithms")["remax"].impl
    assert spec.preset["algorithm"] == {"n_samples_per_prompt": 4}  # from the plugin, not core
    assert load_run_config("remax").algorithm.n_samples_per_prompt == 4
