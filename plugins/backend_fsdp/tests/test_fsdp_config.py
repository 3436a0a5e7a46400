"""Configuration of the fsdp backend and the hf rollout."""

from __future__ import annotations

import pytest

from hfsdk_backend_common.optim_config import OptimConfig
from hfsdk_backend_common.rollout_config import HFRolloutConfig
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig


def test_defaults_exist_for_every_field() -> None:
    role = FSDPRoleConfig()
    assert (role.backend, role.model_path, role.dtype, role.device) == (
        "fsdp",
        None,
        "float32",
        "auto",
    )
    assert role.optim.betas == (0.9, 0.999)
    rollout = HFRolloutConfig()
    assert (rollout.backend, rollout.n, rollout.top_k, rollout.top_p) == ("hf", 1, 0, 1.0)


def test_betas_accept_a_yaml_list_and_refuse_bad_values() -> None:
    assert OptimConfig(betas=[0.9, 0.95]).betas == (0.9, 0.95)
    with pytest.raises(ValueError, match="two numbers in"):
        OptimConfig(betas=[0.9])
    with pytest.raises(ValueError, match="two numbers in"):
        OptimConfig(betas=[0.9, 1.5])


def test_invalid_values_are_refused() -> None:
    with pytest.raises(ValueError, match="lr_schedule"):
        OptimConfig(lr_schedule="linear")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="micro_batch_size"):
        FSDPRoleConfig(micro_batch_size=0)
    with pytest.raises(ValueError, match="top_p"):
        HFRolloutConfig(top_p=0.0)
    with pytest.raises(ValueError, match="dtype"):
        FSDPRoleConfig(dtype="float16")  # type: ignore[arg-type]


def test_rollout_n_in_a_run_config_is_refused() -> None:
    from hfsdk.core.config import load_run_config
    from hfsdk.core.errors import ConfigError

    with pytest.raises(
        ConfigError, match=r"rollout\.n=4 is not used .* algorithm\.n_samples_per_prompt"
    ):
        load_run_config("grpo", None, ["rollout.n=4"])
    assert load_run_config("grpo", None, ["algorithm.n_samples_per_prompt=2"]).rollout.n == 1


def test_mini_batch_split_follows_the_declared_role_kinds() -> None:
    """A trained role (policy, value or score-model kind) must split; a frozen one is not."""
    from hfsdk import ConfigError
    from hfsdk.core.config.run_config import resolve_run_config

    two_devices = {"placement": {"pools": {"global": {"devices": 2}}}}
    with pytest.raises(ConfigError, match=r"critic\.mini_batch_size=7 is not divisible"):
        resolve_run_config("ppo", {**two_devices, "critic": {"mini_batch_size": 7}})
    # The reference is of kind frozen_policy: it never splits mini-batches.
    config = resolve_run_config("ppo", {**two_devices, "reference": {"mini_batch_size": 7}})
    assert config.reference.mini_batch_size == 7
    # A trained reward model splits its mini-batches too (it failed on its ranks before).
    with pytest.raises(ConfigError, match=r"reward_model\.mini_batch_size=7 is not divisible"):
        resolve_run_config("reward_model", {**two_devices, "reward_model": {"mini_batch_size": 7}})


def test_lora_is_for_the_actor_and_its_default_rollout_layout() -> None:
    from hfsdk.core.config import load_run_config
    from hfsdk.core.errors import ConfigError

    load_run_config("grpo", None, ["actor.lora.rank=8"])  # fine
    with pytest.raises(ConfigError, match=r"reference\.lora\.rank=4: LoRA adapters train the"):
        load_run_config("grpo", None, ["reference.lora.rank=4"])
    overrides = ["actor.lora.rank=8", "actor.rollout_layout.tp=2", "placement.pools.global.devices=2",
                 "actor.mini_batch_size=8"]  # fmt: skip
    with pytest.raises(ConfigError, match=r"actor\.lora\.rank=8 with actor\.rollout_layout\.tp=2"):
        load_run_config("grpo", None, overrides)
