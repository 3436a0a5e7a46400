"""The default task's preset sits under the user's config and never breaks it."""

from __future__ import annotations

from hfsdk.core.config import load_run_config
from hfsdk.core.default_task.preset import with_default_task_preset


def test_preset_fills_only_what_the_user_left_out() -> None:
    config = load_run_config("grpo", None, ["actor.optim.lr=0.002"])
    assert config.actor.optim.lr == 0.002  # the user's value wins
    assert config.data.batch_size == 16 and config.trainer.total_steps == 30  # preset
    assert config.actor.mini_batch_size == 32  # grpo's own preset entry


def test_no_preset_with_user_data() -> None:
    data = {"data": {"train_files": ["prompts.jsonl"]}}
    assert with_default_task_preset("ppo", data) == data


def test_sections_of_another_backend_take_no_preset_keys() -> None:
    merged = with_default_task_preset("ppo", {"actor": {"backend": "elsewhere"}})
    assert merged["actor"] == {"backend": "elsewhere"}
    assert merged["critic"]["optim"]["lr"] == 1e-3


def test_megatron_sections_take_the_preset_keys() -> None:
    """megatron roles share the fsdp batch and optimizer keys, so the preset fits them."""
    merged = with_default_task_preset("ppo", {"critic": {"backend": "megatron"}})
    assert merged["critic"]["backend"] == "megatron"
    assert merged["critic"]["optim"]["lr"] == 1e-3
