"""GRPO on a verl-format parquet scored by verl-, TRL- and OpenRLHF-style reward functions.

The dataset is the default task's prompts in verl's layout (chat messages,
``reward_model.ground_truth``); the default model's tokenizer has no chat
template, so prompts get the plain rendering — the same text the native task
uses. The three foreign functions and the native ``default_task`` reward score
the same thing, each with weight 1/4: every step their metrics must agree
exactly (the adapters hand each function the right data), and the summed
reward must rise as the native default run's does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

REWARDS = """
import re
import torch


def _first_number(text):
    found = re.search(r"-?\\d+", text)
    return int(found.group()) if found else None


def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    assert data_source == "hfsdk/addition" and extra_info["split"] == "train", extra_info
    correct = _first_number(solution_str) == int(ground_truth)
    return {"score": float(correct), "answered": float(_first_number(solution_str) is not None)}


def trl_reward(prompts, completions, ground_truth, ability, **kwargs):
    assert prompts[0][-1]["role"] == "user" and ability[0] == "math", prompts[0]
    return [
        float(_first_number(c[0]["content"]) == int(g))
        for c, g in zip(completions, ground_truth, strict=True)
    ]


def reward_func(queries, prompts, labels):
    return torch.tensor(
        [float(_first_number(q[len(p):]) == int(l)) for q, p, l in zip(queries, prompts, labels)]
    )
"""

FUNCTIONS = {
    "verl": "rewards.py:compute_score",
    "trl": "rewards.py:trl_reward",
    "openrlhf": "rewards.py:reward_func",
    "native": "default_task",
}


def write_verl_parquet(path: Path) -> int:
    """The default task's training prompts in verl's parquet layout; returns the row count."""
    import datasets

    from hfsdk import default_task_assets

    assets = default_task_assets()
    rows = [json.loads(line) for line in Path(assets.train_files[0]).read_text().splitlines()]
    verl_rows = [
        {
            "data_source": "hfsdk/addition",
            "prompt": [{"role": "user", "content": row["prompt"]}],
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": row["answer"]},
            "extra_info": {"split": "train", "index": index},
        }
        for index, row in enumerate(rows)
    ]
    datasets.Dataset.from_list(verl_rows).to_parquet(str(path))
    return len(verl_rows)


@pytest.mark.heavy  # the migration plugin's imported-config runs stay in the quick suite
@pytest.mark.slow
@pytest.mark.distributed
def test_verl_parquet_with_foreign_reward_styles_learns(tmp_path: Path) -> None:
    from hfsdk.core.config.run_config import with_algorithm_preset

    write_verl_parquet(tmp_path / "train.parquet")
    (tmp_path / "rewards.py").write_text(textwrap.dedent(REWARDS))
    config = with_algorithm_preset("grpo", {})  # the default task's settings of grpo
    config["data"]["train_files"] = ["train.parquet"]
    config["reward"] = {
        "functions": [{"name": name, "weight": 0.25} for name in FUNCTIONS.values()]
    }
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(config))
    hfsdk = Path(sys.executable).with_name("hfsdk")
    result = subprocess.run(
        [
            str(hfsdk),
            "run",
            "--algo",
            "grpo",
            "--config",
            "run.yaml",
            "--run-dir",
            "run",
            "--quiet",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    # The tokenizer has no chat template: the run says so, once.
    assert result.stderr.count("no chat template") == 1, result.stderr[-3000:]
    rows = [
        json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    ]
    assert len(rows) == config["trainer"]["total_steps"]
    for row in rows:
        # A file's function logs under its own name (rewards.py:compute_score -> compute_score).
        per_style = {
            style: row[f"reward/{name.rsplit(':', 1)[-1]}"] for style, name in FUNCTIONS.items()
        }
        assert len(set(per_style.values())) == 1, (row["step"], per_style)
        assert row["reward/mean"] == pytest.approx(per_style["native"], abs=1e-6)
        assert 0.0 <= row["reward/compute_score/answered"] <= 1.0
    first = sum(r["reward/mean"] for r in rows[:5]) / 5
    last = sum(r["reward/mean"] for r in rows[-5:]) / 5
    assert last - first >= 0.15, (
        f"reward rose by only {last - first:.3f} ({first:.3f} -> {last:.3f})"
    )
