"""Configuration of the fsdp backend and the hf rollout."""

from __future__ import annotations

from pathlib import Path

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


def test_rollout_n_is_refused_for_any_rollout_with_an_n_field() -> None:
    """The hf_vision rollout's config is no HFRolloutConfig, yet its n is as unused."""
    pytest.importorskip("hfsdk_vision")
    from hfsdk.core.config import load_run_config
    from hfsdk.core.errors import ConfigError

    with pytest.raises(
        ConfigError, match=r"rollout\.n=4 is not used .* algorithm\.n_samples_per_prompt"
    ):
        load_run_config("grpo", None, ["rollout.backend=hf_vision", "rollout.n=4"])
    config = load_run_config("grpo", None, ["rollout.backend=hf_vision"])
    assert config.rollout.n == 1


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
    # A trained reward model splits its mini-batches too (it failed on its ranks before), in
    # whole pairs.
    with pytest.raises(ConfigError, match=r"reward_model\.mini_batch_size=7 .* 2 data-parallel"):
        resolve_run_config("reward_model", {**two_devices, "reward_model": {"mini_batch_size": 7}})


def test_lora_is_for_the_actor_and_its_default_rollout_layout() -> None:
    from hfsdk.core.config import load_run_config
    from hfsdk.core.errors import ConfigError

    load_run_config("grpo", None, ["actor.lora.rank=8"])  # fine
    with pytest.raises(ConfigError, match=r"reference\.lora\.rank=4: LoRA adapters train the"):
        load_run_config("grpo", None, ["reference.lora.rank=4"])
    # A signal's scoring model too: it passed the config and failed after its model loaded.
    with pytest.raises(ConfigError, match=r"reward\.model\.lora\.rank=4: .* reward\.model\.lora"):
        load_run_config("ppo", None, ["reward.model.lora.rank=4"])
    overrides = ["actor.lora.rank=8", "actor.rollout_layout.tp=2", "placement.pools.global.devices=2",
                 "actor.mini_batch_size=8"]  # fmt: skip
    with pytest.raises(ConfigError, match=r"actor\.lora\.rank=8 with actor\.rollout_layout\.tp=2"):
        load_run_config("grpo", None, overrides)


MEMORY_LEVERS = [
    "actor.micro_batch_size=1",
    "actor.forward_micro_batch_size=2",
    "actor.micro_batch_tokens=512",
    "actor.gradient_checkpointing=true",
    "actor.packing=true",
    "actor.remove_padding=false",
    "actor.offload=true",
    "actor.reshard_after_forward=false",
    "reference.forward_micro_batch_size=1",
]


def test_resume_accepts_changed_memory_levers(tmp_path) -> None:
    """An out-of-memory run could not resume with a smaller micro-batch or gradient
    checkpointing: every memory lever was refused as "a different config", though none
    changes the numbers beyond float rounding."""
    import torch

    from hfsdk.core.config import load_run_config
    from hfsdk.core.errors import HfsdkError
    from hfsdk.core.trainer.run_directory import RunDirectory

    step = tmp_path / "checkpoints" / "step_1"
    step.mkdir(parents=True)
    (step / "COMPLETE").write_text("1\n")
    torch.save({"step": 1}, step / "trainer_state.pt")
    (tmp_path / "config.yaml").write_text(load_run_config("grpo", None, []).to_yaml())
    RunDirectory(tmp_path).check_config_matches(load_run_config("grpo", None, MEMORY_LEVERS))
    # What the checkpoint's state depends on is still refused.
    with pytest.raises(HfsdkError, match=r"different config \(actor\.mini_batch_size changed\)"):
        RunDirectory(tmp_path).check_config_matches(
            load_run_config("grpo", None, [*MEMORY_LEVERS, "actor.mini_batch_size=4"])
        )


def test_token_budgets_on_paired_rows_are_refused_with_the_config() -> None:
    """DPO and reward-model rows come in pairs that must share a pass; micro_batch_tokens was
    refused only at step 1, after the models loaded, leaving a run directory behind."""
    from hfsdk.core.config import load_run_config
    from hfsdk.core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"actor\.micro_batch_tokens=512 .* preference pairs"):
        load_run_config("dpo", None, ["actor.micro_batch_tokens=512"])
    with pytest.raises(ConfigError, match=r"reward_model\.micro_batch_tokens=512 .* pairs"):
        load_run_config("reward_model", None, ["reward_model.micro_batch_tokens=512"])
    # The reference only infers: its passes may split pairs.
    load_run_config("dpo", None, ["reference.micro_batch_tokens=512"])
    load_run_config("grpo", None, ["actor.micro_batch_tokens=512"])


def test_packing_on_a_score_model_is_refused() -> None:
    """Reward and cost models score unpacked rows: packing: true did nothing on them."""
    from hfsdk.core.config import load_run_config
    from hfsdk.core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"reward_model\.packing: true .* score models"):
        load_run_config("reward_model", None, ["reward_model.packing=true"])
    with pytest.raises(ConfigError, match=r"reward\.model\.packing: true .* score models"):
        load_run_config("ppo", None, ["reward.model={packing: true}"])
    load_run_config("ppo", None, ["critic.packing=true", "actor.packing=true"])


def test_a_mini_batch_that_splits_preference_pairs_is_refused_with_the_config() -> None:
    """DPO and reward-model mini-batches hold whole pairs on every rank; a size that split
    them was refused only at step 1, after the models loaded (the engine's message)."""
    from hfsdk.core.config import load_run_config
    from hfsdk.core.errors import ConfigError

    whole = r"mini_batch_size=3 does not split into whole groups of 2 rows"
    with pytest.raises(ConfigError, match=rf"actor\.{whole} .* 2 x 1 = 2"):
        load_run_config("dpo", None, ["actor.mini_batch_size=3"])
    with pytest.raises(ConfigError, match=rf"reward_model\.{whole}"):
        load_run_config("reward_model", None, ["reward_model.mini_batch_size=3"])
    two = ["placement.pools.global.devices=2"]  # a fixed placement: times its device count
    with pytest.raises(ConfigError, match=r"actor\.mini_batch_size=6 .* = 4; set actor\.mini_"):
        load_run_config("dpo", None, [*two, "actor.mini_batch_size=6"])
    load_run_config("dpo", None, [*two, "actor.mini_batch_size=8"])
    load_run_config("dpo", None, ["reference.mini_batch_size=3"])  # frozen: never splits
    load_run_config("grpo", None, ["actor.mini_batch_size=3"])  # single rows


@pytest.mark.parametrize(
    "setting",
    ["actor.lora.alpha=32", "actor.lora.dropout=0.1", "actor.lora.target_modules=[q_proj]",
     "actor.lora.export_merged=true"],
)  # fmt: skip
def test_lora_settings_without_a_rank_are_warned_about(setting: str) -> None:
    # Before: rank 0 (the default) trains the full model and dropped these without a word. A
    # warning, not a refusal: a run saved with such a config must still export and resume.
    from hfsdk import get_registry
    from hfsdk.core.config import load_run_config
    from hfsdk_backend_common.lora_config import unused_lora_settings

    key = setting.split("=")[0]
    warning = unused_lora_settings(load_run_config("grpo", None, [setting])) or ""
    assert warning.startswith("actor.lora.rank is 0: LoRA is off") and key in warning
    assert "\n" not in warning and "would be ignored; set rank > 0" in warning
    assert (
        unused_lora_settings(load_run_config("grpo", None, ["actor.lora.rank=8", setting])) is None
    )
    assert "unused_lora_settings" in get_registry("preflight_checks")


def test_a_saved_config_with_lora_settings_and_rank_0_loads(tmp_path: Path) -> None:
    # Before: the refusal also fired on a saved run's config.yaml, so export, replay and
    # resume of a run saved with actor.lora.alpha: 32 and rank 0 had no way through.
    import yaml

    from hfsdk.core.config import load_run_config
    from hfsdk_backend_common.lora_config import unused_lora_settings

    saved = load_run_config("grpo", None, []).to_dict()
    saved["actor"]["lora"]["alpha"] = 32.0
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(saved))
    config = load_run_config(None, path)
    assert config.sections["actor"].lora.alpha == 32.0
    assert "actor.lora.alpha=32.0" in (unused_lora_settings(config) or "")


def test_lora_settings_equal_to_their_defaults_need_no_rank() -> None:
    from hfsdk.core.config import load_run_config

    defaults = ["actor.lora.alpha=16", "actor.lora.dropout=0", "actor.lora.export_merged=false",
                "actor.lora.target_modules=[q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj]"]  # fmt: skip
    load_run_config("grpo", None, defaults)


def test_only_a_frozen_policy_is_told_the_actor_shares_its_base() -> None:
    # Before: a critic's refusal said a reference on the actor's model shares its base too.
    from hfsdk.core.config import load_run_config
    from hfsdk.core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"reference\.lora\.rank=4: .*shares the actor's base"):
        load_run_config("ppo", None, ["reference.lora.rank=4"])
    with pytest.raises(ConfigError, match=r"critic\.lora\.rank=4: LoRA adapters train") as got:
        load_run_config("ppo", None, ["critic.lora.rank=4"])
    assert "reference" not in str(got.value) and "base weights" not in str(got.value)
