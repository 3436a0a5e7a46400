"""``hfsdk config import --from verl`` against verl's own shipped configs, composed by Hydra.

verl is installed without its dependencies by ``make setup`` (``pip install --no-deps
--target .venv/verl/<version>``), outside site-packages: its wheel also installs
top-level ``tests`` and ``scripts`` packages. Nothing of verl is copied into this repo.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest

from hfsdk.core.config import resolve_run_config
from hfsdk.core.errors import ConfigError
from hfsdk_migration.importing import import_config, read_source, without_source_paths

FIXTURES = Path(__file__).parent / "fixtures"
ENV = {"HOME": "/home/u"}
VERSIONS = ("0.9.1", "0.5.0")


def _target(version: str) -> Path:
    target = Path(sys.prefix) / "verl" / version
    if not (target / "verl" / "trainer" / "config" / "ppo_trainer.yaml").is_file():
        pytest.skip(f"verl {version} is not in {target}; run `make setup`")
    return target


def _config_dir(version: str) -> str:
    return str(_target(version) / "verl" / "trainer" / "config")


def _import(name: str, config_dir: str | None, *args: str):
    dirs = [config_dir] if config_dir else None
    data, warnings = read_source("verl", str(FIXTURES / name), list(args), verl_config_dir=dirs,
                                 env=ENV)  # fmt: skip
    result = import_config("verl", data, warnings=warnings)
    return result, resolve_run_config(None, without_source_paths(result.config))


@pytest.mark.parametrize("version", VERSIONS)
def test_verls_ppo_trainer_imports_with_an_example_scripts_overrides(version: str) -> None:
    # The launch script of verl's examples/grpo_trainer (fsdp actor, vllm rollout at tp 2).
    result, cfg = _import("verl_run_grpo_fsdp_vllm.sh", _config_dir(version))
    assert cfg.algo == "grpo" and cfg.rollout.backend == "vllm"
    assert cfg.algorithm.n_samples_per_prompt == 5 and cfg.actor.mini_batch_size == 16 * 5
    assert cfg.actor.micro_batch_size == 8 and cfg.actor.optim.lr == 1e-6
    # verl's own defaults, read from its files (not hfsdk's copy): weight decay, clip ratios.
    assert cfg.actor.optim.weight_decay == 0.01 and cfg.policy_loss.clip_ratio_high == 0.2
    assert cfg.algorithm.kl_estimator == "low_var_kl" and cfg.algorithm.kl_loss_coef == 0.001
    # vLLM at tp 2 on an FSDP actor is not served (the actor's slices are not HF-named).
    assert "rollout_layout" not in result.config["actor"]
    assert not any("hfsdk's copy of verl" in w for w in result.warnings)
    # The per-key report: one line per key with no counterpart, with its reason.
    joined = "\n".join(result.unmapped)
    assert "actor_rollout_ref.ref.fsdp_config.param_offload = True  (no counterpart" in joined
    assert "${" not in joined and all("  (" in line for line in result.unmapped)


@pytest.mark.parametrize("version", VERSIONS)
def test_verls_ppo_megatron_trainer_imports_with_an_example_scripts_overrides(
    version: str,
) -> None:
    # --config-name ppo_megatron_trainer, tp 4 / pp 2, the rollout at tp 2 (examples' megatron).
    result, cfg = _import("verl_run_grpo_megatron.sh", _config_dir(version))
    assert result.config["actor"]["backend"] == result.config["reference"]["backend"] == "megatron"
    assert result.config["actor"]["parallel"] == {"tp": 4, "pp": 2}
    assert cfg.trainer.total_steps == 100 and cfg.actor.mini_batch_size == 32 * 4


def test_an_installed_verl_is_composed_with_its_defaults_list(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # verl 0.9's ppo_trainer picks its actor by `actor@actor_rollout_ref.actor:
    # ${model_engine}_actor`; hfsdk's own composer failed on it whenever verl was installed.
    monkeypatch.syspath_prepend(str(_target("0.9.1")))
    result, cfg = _import("verl_run_grpo_fsdp_vllm.sh", None)
    assert cfg.actor.mini_batch_size == 80
    assert "model_engine = 'dp'  (no hfsdk counterpart)" in result.unmapped
    assert not any("hfsdk's copy of verl" in w for w in result.warnings)
    # The engine chosen through the interpolated entry: verl's megatron actor has no
    # fsdp_config, so the fsdp script's offload overrides are refused there, as verl refuses them.
    with pytest.raises(ConfigError, match=r"has no key 'actor_rollout_ref\.actor\.fsdp_config"):
        _import("verl_run_grpo_fsdp_vllm.sh", None, "model_engine=megatron")


@pytest.mark.parametrize("version", VERSIONS)
def test_a_misspelled_override_is_refused_with_the_key_it_meant(version: str) -> None:
    with pytest.raises(ConfigError) as info:
        _import(
            "verl_run_grpo_fsdp_vllm.sh",
            _config_dir(version),
            "actor_rollout_ref.actor.optim.lrr=2e-6",
        )
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(
        "override 'actor_rollout_ref.actor.optim.lrr=2e-6': verl's ppo_trainer has no key "
        "'actor_rollout_ref.actor.optim.lrr' (did you mean 'actor_rollout_ref.actor.optim.lr'?)"
    )
    # Adding it on purpose is Hydra's `+`; it is then listed as having no counterpart.
    result, _ = _import(
        "verl_run_grpo_fsdp_vllm.sh",
        _config_dir(version),
        "+actor_rollout_ref.actor.optim.lrr=2e-6",
    )
    assert any(line.startswith("actor_rollout_ref.actor.optim.lrr = 2e-06") for line in
               result.unmapped)  # fmt: skip


def test_verl_0_9_runs_dapo_from_its_ppo_trainer_and_0_5_needs_the_recipe_config() -> None:
    _, cfg = _import("verl_run_dapo.sh", _config_dir("0.9.1"))
    assert cfg.algo == "dapo" and cfg.algorithm.dynamic_sampling
    assert cfg.actor.micro_batch_tokens == (2048 + 4096) * 2
    # verl 0.5 kept filter_groups in recipe/dapo/config/dapo_trainer.yaml (not in the wheel).
    with pytest.raises(ConfigError, match=r"has no key 'algorithm\.filter_groups\.enable'"):
        _import("verl_run_dapo.sh", _config_dir("0.5.0"))


LOCAL = [
    "data.train_files=[]", "data.val_files=[]", "actor.model_path=null",
    "trainer.loggers=[jsonl]", "trainer.total_steps=2", "trainer.save_every=0",
    "trainer.val_every=0", "trainer.val_before_train=false",
    "rollout.backend=hf", "rollout.max_response_length=8",
    "data.max_prompt_length=64",
    "placement.pools={global: {devices: 1}}", "data.batch_size=2", "actor.dtype=float32",
    "actor.mini_batch_size=4", "actor.micro_batch_size=4", "algorithm.n_samples_per_prompt=2",
    "actor.rollout_layout.tp=1", "reference.dtype=float32",
]  # fmt: skip
"""What this machine lacks, replaced: the default task's model and data, one CPU device."""
VLLM_ONLY = ("dtype", "gpu_memory_utilization", "max_num_seqs", "sleep", "enforce_eager")


SHRUNK = {
    "verl_run_grpo_fsdp_vllm.sh": [],
    "verl_run_grpo_megatron.sh": [
        "actor.parallel={tp: 1, pp: 1}",
        "reference.parallel={tp: 1, pp: 1}",
    ],
}


@pytest.mark.slow
@pytest.mark.parametrize("script", list(SHRUNK))
def test_a_shrunk_import_of_verl_0_9_trains_two_steps(tmp_path: Path, script: str) -> None:
    import yaml

    from hfsdk.core.config import load_run_config
    from hfsdk.core.trainer.trainer import Trainer

    result, _ = _import(script, _config_dir("0.9.1"))
    config = copy.deepcopy(result.config)
    config["rollout"] = {k: v for k, v in config["rollout"].items() if k not in VLLM_ONLY}
    config_file = tmp_path / "imported.yaml"
    config_file.write_text(yaml.safe_dump(config))
    cfg = load_run_config(None, str(config_file), [*LOCAL, *SHRUNK[script]])
    # Imported settings kept through the shrink: verl's KL loss and its estimator.
    assert cfg.algorithm.kl_estimator == "low_var_kl" and cfg.algorithm.kl_loss_coef == 0.001
    rows = Trainer(cfg, str(tmp_path / "run"), quiet=True).fit()
    assert [r["step"] for r in rows] == [1, 2]
    assert all(0.0 <= r["reward/mean"] <= 1.0 for r in rows)
    # The reference ran (verl's use_kl_loss=True came through): its KL to the actor is logged.
    assert all("timing/ref_log_prob_s" in r and r["actor/kl"] >= 0.0 for r in rows)
    megatron = script == "verl_run_grpo_megatron.sh"
    assert (cfg.actor.backend == "megatron") == megatron
