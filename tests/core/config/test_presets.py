"""The default task's preset sits under the user's config and never breaks it."""

from __future__ import annotations

import attrs
import pytest

import hfsdk
from hfsdk import AlgorithmSpec
from hfsdk.core.config import load_run_config
from hfsdk.core.config.presets import with_default_task_preset
from hfsdk.core.config.run_config import with_algorithm_preset
from hfsdk.core.errors import ConfigError
from hfsdk.core.role_config import RoleConfig, RolloutConfig


def test_preset_fills_only_what_the_user_left_out() -> None:
    config = load_run_config("grpo", None, ["actor.optim.lr=0.002"])
    assert config.actor.optim.lr == 0.002  # the user's value wins
    assert config.data.batch_size == 16 and config.trainer.total_steps == 30  # preset
    assert config.actor.mini_batch_size == 32  # grpo's own preset entry


def test_no_preset_with_user_data() -> None:
    data = {"data": {"train_files": ["prompts.jsonl"]}}
    assert with_algorithm_preset("ppo", data) == data
    assert with_default_task_preset({"actor": {"optim": {"lr": 1.0}}}, data) == data


def test_megatron_sections_take_the_preset_keys() -> None:
    """megatron roles share the fsdp batch and optimizer keys, so the preset fits them."""
    merged = with_algorithm_preset("ppo", {"critic": {"backend": "megatron"}})
    assert merged["critic"]["backend"] == "megatron"
    assert merged["critic"]["optim"]["lr"] == 1e-3
    assert merged["critic"]["mini_batch_size"] == 32
    # The preset names no backend; the core never forces one.
    assert "backend" not in with_algorithm_preset("ppo", {})["critic"]


@attrs.frozen(kw_only=True)
class _SlimOptim:
    lr: float = 1.0


@attrs.frozen(kw_only=True)
class _SlimRole(RoleConfig):
    """A new backend's role config: an optimizer and mini-batches, no micro-batch keys."""

    backend: str = "slim"
    optim: _SlimOptim = attrs.field(factory=_SlimOptim)
    mini_batch_size: int = 4


@attrs.frozen(kw_only=True)
class _SlimRollout(RolloutConfig):
    """A new rollout backend without a response-length key."""

    backend: str = "slimgen"
    temperature: float = 1.0


class _SlimPlugin:
    @staticmethod
    @hfsdk.hookimpl
    def hfsdk_register_training_backends(register):  # type: ignore[no-untyped-def]
        register("slim", object, config_cls=_SlimRole)

    @staticmethod
    @hfsdk.hookimpl
    def hfsdk_register_rollout_backends(register):  # type: ignore[no-untyped-def]
        register("slimgen", object, config_cls=_SlimRollout)


def test_a_new_backend_takes_the_preset_keys_its_config_has() -> None:
    """Adding a backend touches no algorithm: the preset applies with the keys it shares."""
    from hfsdk.core.config.converter import make_converter, structure
    from hfsdk.core.plugin_manager import build_plugin_manager

    pm = build_plugin_manager([("slim", _SlimPlugin)])
    user = {"actor": {"backend": "slim"}, "rollout": {"backend": "slimgen"}}
    merged = with_algorithm_preset("ppo", user, pm=pm)
    assert merged["actor"] == {"backend": "slim", "optim": {"lr": 1e-4}, "mini_batch_size": 32}
    assert merged["rollout"] == {"backend": "slimgen"}  # no max_response_length there
    assert merged["critic"]["micro_batch_size"] == 64  # the default (fsdp) section keeps it
    role = structure(make_converter(), merged["actor"], _SlimRole, path="actor")
    assert role == _SlimRole(optim=_SlimOptim(lr=1e-4), mini_batch_size=32)


def test_an_unknown_backend_takes_the_preset_as_is_and_fails_on_its_name() -> None:
    merged = with_algorithm_preset("ppo", {"actor": {"backend": "nowhere"}})
    assert merged["actor"]["optim"]["lr"] == 1e-4
    with pytest.raises(ConfigError, match="nowhere") as info:
        load_run_config("ppo", None, ["actor.backend=nowhere"])
    assert "micro_batch_size" not in str(info.value)


def test_keys_a_section_class_lacks_are_left_out_recursively() -> None:
    preset = {"actor": {"optim": {"lr": 1, "betas": [0, 0]}, "width": 3}, "rollout": {"n": 2}}
    classes = {"actor": _SlimRole, "rollout": _SlimRollout}
    task_preset = {"trainer": {"total_steps": 7}}
    merged = with_default_task_preset(preset, {}, classes.get, task_preset=task_preset)
    assert merged["actor"] == {"optim": {"lr": 1}} and "rollout" not in merged
    assert merged["trainer"]["total_steps"] == 7  # the task's own preset, under the algorithm's
    # The registry's default task brings its preset of the core's sections.
    assert (
        load_run_config("grpo").trainer.total_steps
        == hfsdk.get_task().preset["trainer"]["total_steps"]
    )
    # A section whose class is unknown takes the preset as is.
    assert with_default_task_preset(preset, {})["rollout"] == {"n": 2}


def test_a_preset_that_names_a_backend_is_refused() -> None:
    with pytest.raises(ValueError, match="preset section 'actor' names a backend"):
        AlgorithmSpec(
            name="named",
            program=object,
            config_cls=object,
            roles=(("actor", "policy"),),
            preset={"actor": {"backend": ["fsdp"], "mini_batch_size": 8}},
        )


def test_every_installed_presets_keys_exist_in_a_backend_of_their_section() -> None:
    """A preset key no installed backend has is a typo: it would be left out everywhere."""
    from hfsdk.core.config.presets import deep_merge, keys_for

    task_preset = hfsdk.get_task().preset

    def configs(kind: str) -> list[type]:
        return [e.config_cls for e in hfsdk.get_registry(kind).values() if e.config_cls]

    for name, entry in hfsdk.get_registry("algorithms").items():
        spec = entry.impl
        kinds = {r.name: r.kind for r in spec.roles}
        for section, values in deep_merge(task_preset, spec.preset).items():
            if section == "rollout":
                classes = configs("rollout_backends")
            elif section in kinds:
                classes = configs("training_backends")
            else:
                classes = [type(getattr(load_run_config(name), section))]
            kept: dict = {}
            for cls in classes:
                kept = deep_merge(kept, keys_for(cls, values))
            assert kept == values, (name, section, values, kept)


def test_a_third_party_algorithm_brings_its_own_preset() -> None:
    import hfsdk

    spec = hfsdk.get_registry("algorithms")["remax"].impl
    assert spec.preset["algorithm"] == {"n_samples_per_prompt": 4}  # from the plugin, not core
    assert load_run_config("remax").algorithm.n_samples_per_prompt == 4
