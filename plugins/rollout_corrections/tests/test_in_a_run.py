"""The plugin in a run: the ``mismatch/*`` metrics reach the step's line and
``trainer.max_mismatch_kl`` stops on them (saved), and a preset and listed corrections weight
the loss (moved with the corrections from ``tests/core/trainer/test_mismatch_gate.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfsdk.core.config import load_run_config
from hfsdk.core.trainer.checkpoint import complete_checkpoints
from hfsdk.core.trainer.tracking import read_metrics
from hfsdk.core.trainer.trainer import Trainer
from hfsdk_rollout_corrections.mismatch import MismatchStop

SMALL = [
    "data.batch_size=4",
    "algorithm.n_samples_per_prompt=2",
    "actor.mini_batch_size=4",
    "actor.micro_batch_size=8",
    "trainer.executor=local",
    "trainer.loggers=[jsonl]",
]


@pytest.mark.distributed
@pytest.mark.heavy
def test_one_step_off_reports_mismatch_and_the_gate_stops_with_a_checkpoint(
    tmp_path: Path,
) -> None:
    overrides = [*SMALL, "trainer.total_steps=3", "trainer.pipeline=one_step_off"]
    # Step 1 samples with the weights it trains (KL 0); step 2 with the weights before step
    # 1's update, so its K3 KL is positive and passes any tiny limit.
    config = load_run_config("grpo", None, [*overrides, "trainer.max_mismatch_kl=1e-12"])
    with pytest.raises(MismatchStop) as info:
        Trainer(config, tmp_path / "run", quiet=True).fit()
    message = str(info.value)
    assert message.startswith("step 2: mismatch/kl_k3=") and "\n" not in message
    assert "checkpoint step_2 saved" in message
    rows = read_metrics(tmp_path / "run")
    assert [r["step"] for r in rows] == [1, 2]
    assert rows[0]["mismatch/kl_k3"] == pytest.approx(0.0, abs=1e-6)
    assert rows[1]["mismatch/kl_k3"] > 1e-12
    assert rows[1]["mismatch/token_gap_max"] >= rows[1]["mismatch/token_gap_p99"] > 0
    assert complete_checkpoints(tmp_path / "run")[0][0] == 2  # newest first


@pytest.mark.distributed
def test_a_preset_and_listed_corrections_apply_in_a_run(tmp_path: Path) -> None:
    overrides = [
        *SMALL,
        "trainer.total_steps=2",
        "trainer.pipeline=one_step_off",
        "rollout_correction.preset=geo_rs_tis",
        "rollout_correction.apply=[{name: icepop, c: 1.001}]",
    ]
    rows = Trainer(load_run_config("grpo", None, overrides), tmp_path / "run", quiet=True).fit()
    first, second = rows
    # Step 1 samples with the weights it trains: nothing to correct, nothing dropped.
    assert first["actor/is_kept_share"] == pytest.approx(1.0)
    assert first["actor/icepop_masked_share"] == pytest.approx(0.0)
    # Step 2's tokens are one update old: a band of ±0.1 % drops some, and what each
    # correction dropped is reported.
    assert second["actor/icepop_masked_share"] > 0
    assert second["actor/is_kept_share"] < 1.0
    for key in ("actor/geo_rs_masked_seq_share", "actor/tis_truncated_share"):
        assert 0.0 <= second[key] <= 1.0
    assert second["mismatch/kl_k3"] > 0
