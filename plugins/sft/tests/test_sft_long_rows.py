"""SFT and rows longer than ``algorithm.max_length``: dropped, and a step whose rows are all
dropped draws the next ones; data with no row short enough is refused before the run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hfsdk import HfsdkError
from hfsdk.core.config import load_run_config
from hfsdk.core.trainer.trainer import Trainer


def _data(tmp_path: Path, repeats: list[int]) -> Path:
    """Rows "a + 1" -> "a+1" said ``repeats[a]`` times (6 times: 10 tokens with the prompt)."""
    rows = [
        {"prompt": f"{a} + 1", "completion": " ".join([str(a + 1)] * n)}
        for a, n in enumerate(repeats)
    ]
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return data


def _overrides(data: Path, *extra: str) -> list[str]:
    return [
        f"data.train_files=[{data}]",
        "algorithm.response_key=completion",
        "algorithm.max_length=8",
        "data.shuffle=false",
        "data.batch_size=2",
        "actor.mini_batch_size=2",
        "actor.micro_batch_size=2",
        "reward.functions=[]",
        "trainer.val_before_train=false",
        "trainer.val_every=0",
        *extra,
    ]


def test_a_step_whose_rows_are_all_too_long_draws_the_next_rows(tmp_path: Path) -> None:
    # Step 2 draws rows 2 and 3, both long: it stopped the run, and every resume, there.
    data = _data(tmp_path, [1, 1, 6, 6, 1, 1, 1, 1])
    overrides = _overrides(
        data, "trainer.total_steps=2", "algorithm.loss_agg_mode=seq-mean-token-sum"
    )
    metrics = Trainer(load_run_config("sft", None, overrides), tmp_path / "run", quiet=True).fit()
    assert [row["step"] for row in metrics] == [1, 2]
    assert [row["sft/dropped_rows"] for row in metrics] == [0.0, 2.0]
    assert metrics[1]["sft/trained_tokens"] == 2 * 2  # rows 4 and 5: "5 </s>", "6 </s>"
    # sft/loss is the per-token NLL, not the objective (a per-row sum here: twice as big).
    for row in metrics:
        assert row["sft/loss"] == pytest.approx(row["actor/nll"])
        assert row["actor/pg_loss"] == pytest.approx(2 * row["actor/nll"], rel=1e-4)


def test_data_whose_rows_are_all_too_long_is_refused_before_the_run(tmp_path: Path) -> None:
    data = _data(tmp_path, [6, 6, 7])
    config = load_run_config("sft", None, _overrides(data, "trainer.total_steps=1"))
    with pytest.raises(HfsdkError, match=r"^all 3 training rows are longer than algorithm.max_le"):
        Trainer(config, tmp_path / "run", quiet=True).fit()
    assert not (tmp_path / "run").exists()  # refused before the run directory is made
