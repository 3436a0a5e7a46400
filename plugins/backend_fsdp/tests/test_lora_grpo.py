"""GRPO end to end with a LoRA actor (in-process workers, dp 1): trains, shares the base, resumes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hfsdk.core.config import load_run_config
from hfsdk.core.trainer.trainer import Trainer

pytestmark = pytest.mark.slow

RUN = [
    "data.batch_size=4",
    "algorithm.n_samples_per_prompt=2",
    "actor.mini_batch_size=4",
    "actor.micro_batch_size=8",
    "actor.lora.rank=8",
    "actor.lora.alpha=16",
    "actor.optim.lr=0.01",
    "trainer.executor=local",
    "trainer.loggers=[jsonl]",
]
COMPARED = ("actor/pg_loss", "actor/kl", "actor/grad_norm", "reward/mean")


def _fit(run_dir: Path, steps: int) -> list[dict]:
    config = load_run_config("grpo", None, [*RUN, f"trainer.total_steps={steps}"])
    return Trainer(config, run_dir, quiet=True).fit()


def test_lora_grpo_trains_shares_the_base_and_resumes(tmp_path: Path) -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    straight = _fit(tmp_path / "straight", 2)
    # Step 1 trains from the base (KL 0 before its update); by step 2 the adapters moved.
    assert straight[0]["actor/kl"] == pytest.approx(0.0, abs=1e-7)
    assert straight[1]["actor/kl"] > 1e-6
    step = tmp_path / "straight" / "checkpoints" / "step_2"
    # The reference is the actor's base: it has no weights of its own to checkpoint.
    assert not list((step / "reference").glob("*_dcp"))
    export = step / "actor_hf"
    config = json.loads((export / "adapter_config.json").read_text())
    assert config["r"] == 8 and Path(config["base_model_name_or_path"]).is_dir()
    base = AutoModelForCausalLM.from_pretrained(config["base_model_name_or_path"])
    PeftModel.from_pretrained(base, str(export))  # loads: names and shapes match
    # Resume from step 1 continues exactly.
    _fit(tmp_path / "resumed", 1)
    resumed = _fit(tmp_path / "resumed", 2)
    for key in COMPARED:
        assert resumed[-1][key] == pytest.approx(straight[1][key], rel=1e-5, abs=1e-8), key


@pytest.mark.distributed
@pytest.mark.heavy
def test_lora_grpo_at_dp2_on_ray_shares_the_base(tmp_path: Path) -> None:
    """Two Ray workers (one fused actor + reference process each), FSDP over both."""
    overrides = [
        *(o for o in RUN if not o.startswith(("trainer.executor", "actor.mini_batch_size"))),
        "actor.mini_batch_size=8",
        "placement.pools.global.devices=2",
        "trainer.executor=ray",
        "trainer.total_steps=2",
    ]
    rows = Trainer(load_run_config("grpo", None, overrides), tmp_path / "run", quiet=True).fit()
    assert rows[0]["actor/kl"] == pytest.approx(0.0, abs=1e-7)
    assert rows[1]["actor/kl"] > 1e-6
    step = tmp_path / "run" / "checkpoints" / "step_2"
    assert not list((step / "reference").glob("*_dcp"))
    assert sorted(p.name for p in (step / "reference").iterdir()) == [
        "rng_rank0.pt",
        "rng_rank1.pt",
    ]
    assert (step / "actor_hf" / "adapter_model.safetensors").is_file()
