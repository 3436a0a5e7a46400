"""DPO and over-long pairs: a step whose pairs are all dropped draws the next rows."""

from __future__ import annotations

import json
from pathlib import Path

from hfsdk.core.config import load_run_config
from hfsdk.core.trainer.trainer import Trainer


def test_a_step_whose_pairs_are_all_too_long_draws_the_next_rows(tmp_path: Path) -> None:
    # Four short pairs and four with 30-word responses, max_length=20, one pair a step:
    # a step that drew a long pair stopped the run ("every pair of this step is longer").
    rows = [
        {"prompt": f"{i} + 1 =", "chosen": str(i + 1), "rejected": str(i + 3)} for i in range(4)
    ]
    rows += [
        {"prompt": f"{i} + 2 =", "chosen": " ".join(["1"] * 30), "rejected": " ".join(["2"] * 30)}
        for i in range(4)
    ]
    data = tmp_path / "mixed.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    overrides = [
        f"data.train_files=[{data}]",
        "data.val_files=[]",
        "algorithm.max_length=20",
        "data.batch_size=1",
        "trainer.total_steps=4",
        "trainer.val_before_train=false",
        "trainer.seed=2",
    ]
    config = load_run_config("dpo", None, overrides)
    metrics = Trainer(config, tmp_path / "run", quiet=True).fit()
    assert [row["step"] for row in metrics] == [1, 2, 3, 4]
    assert sum(row["dpo/dropped_pairs"] for row in metrics) > 0  # some draw was all long
