"""DPO end to end (in-process, one device): the engine's loss is DPO's, LoRA's reference, learning."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from hfsdk.core.config import load_run_config
from hfsdk.core.trainer.trainer import Trainer


def _run(tmp: Path, name: str, *overrides: str) -> list[dict]:
    config = load_run_config("dpo", overrides=list(overrides))
    return Trainer(config, tmp / name, quiet=True).fit()


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["fsdp", "lora", "megatron"])
def test_first_update_trains_on_log_two_and_moves_towards_the_chosen(
    tmp_path: Path, variant: str
) -> None:
    overrides = ["trainer.total_steps=3", "trainer.val_before_train=false", "trainer.val_every=0"]
    if variant == "lora":
        # The reference is then the actor itself with its adapters disabled (no second copy).
        overrides += ["actor.lora.rank=8", "actor.optim.lr=1e-3"]
    if variant == "megatron":
        overrides += ["actor.backend=megatron", "reference.backend=megatron"]
    rows = _run(tmp_path, "run", *overrides)
    first = rows[0]
    # Policy = reference before the first update: every margin is 0, the loss is log 2 —
    # on the controller and in the actor's update (one micro-batch of whole pairs).
    assert first["dpo/loss"] == pytest.approx(math.log(2.0), abs=1e-5)
    assert first["actor/pg_loss"] == pytest.approx(math.log(2.0), abs=1e-5)
    assert first["dpo/reward_margin"] == pytest.approx(0.0, abs=1e-5)
    # Later steps are measured against the same frozen reference: the chosen answers gained.
    later = rows[1:]
    assert all(r["dpo/reward_margin"] > 0 for r in later), [r["dpo/reward_margin"] for r in later]
    assert later[-1]["dpo/loss"] < math.log(2.0)
    if variant == "lora":
        # The reference was the actor's base, not a second model: it checkpoints no weights.
        reference = tmp_path / "run" / "checkpoints" / "step_3" / "reference"
        assert {p.name for p in reference.rglob("*") if p.is_file()} <= {"rng_rank0.pt"}


@pytest.mark.heavy
def test_default_run_learns_the_preference(tmp_path: Path) -> None:
    rows = _run(tmp_path, "run")
    val = [r for r in rows if "val/dpo/reward_accuracy" in r]
    assert val[0]["val/dpo/reward_margin"] == pytest.approx(0.0, abs=1e-4)
    # Held-out pairs (other wrong answers): measured 0.94 accuracy, margin 0.42 at step 30,
    # and the sampled answers' reward 0.50 -> 0.84 (seed 0, shared CPU).
    assert val[-1]["val/dpo/reward_accuracy"] >= 0.8
    assert val[-1]["val/mean@4"] >= val[0]["val/mean@4"] + 0.15
    assert val[-1]["val/dpo/reward_margin"] >= 0.2
    assert val[-1]["val/dpo/loss"] < val[0]["val/dpo/loss"] - 0.1


@pytest.mark.parametrize("algo", ["dpo", "reward_model"])
def test_a_bad_pair_anywhere_is_refused_before_the_run_starts(tmp_path: Path, algo: str) -> None:
    import json

    from hfsdk import HfsdkError

    rows = [{"prompt": f"{a} + 1 =", "chosen": str(a + 1), "rejected": str(a)} for a in range(9)]
    rows.append({"prompt": "3 + 5 =", "chosen": "8", "rejected": "8"})
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = load_run_config(algo, overrides=[f"data.train_files=[{data}]", "data.shuffle=false"])
    # Before: found by the step that drew it (the reward model named its place in the step).
    with pytest.raises(HfsdkError, match=r"^row 9: 'chosen' and 'rejected' are the same"):
        Trainer(config, tmp_path / "run", quiet=True).fit()
    assert not (tmp_path / "run").exists()
