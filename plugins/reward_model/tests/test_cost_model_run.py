"""A cost model trained with ``--algo reward_model`` is Safe-RLHF's cost role, end to end.

The cost model is trained on the default task's pairs with ``algorithm.higher=
rejected`` (the wrong answer costs more). A Safe-RLHF run then takes its export
as ``cost.model.model_path``; every cost the run sees is checked against the
export's own score of the same sequence, computed here with transformers
alone, and the Lagrange multiplier is checked to have moved on those costs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from hfsdk import get_registry
from hfsdk.core.config import load_run_config
from hfsdk.core.trainer.trainer import Trainer
from hfsdk_testing import hf_sequence_scores

COST_STEPS = 12


def _train_cost_model(run_dir: Path, steps: int, *overrides: str) -> tuple[list[dict], Path]:
    """A cost-model run (the wrong answer of each pair scores higher) and its export."""
    config = load_run_config(
        "reward_model",
        None,
        ["algorithm.higher=rejected", f"trainer.total_steps={steps}", "trainer.val_every=0",
         "trainer.val_before_train=false", *overrides],
    )  # fmt: skip
    rows = Trainer(config, run_dir, quiet=True).fit()
    return rows, run_dir / "checkpoints" / f"step_{steps}" / "reward_model_hf"


@pytest.fixture(scope="module")
def cost_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A short cost-model run's export, trained until the wrong answers cost more."""
    rows, export = _train_cost_model(tmp_path_factory.mktemp("cost") / "run", COST_STEPS)
    # Trained as a cost model: the rejected (wrong) answer scores above the chosen one (the
    # margin is r_chosen − r_rejected of the data's columns).
    assert rows[-1]["score_model/margin"] < 0
    return export


def _safe_rlhf_on(
    cost_model: Path, run_dir: Path, monkeypatch: pytest.MonkeyPatch, *overrides: str
) -> tuple[Any, list[dict], list[tuple[Any, torch.Tensor]]]:
    """A Safe-RLHF run whose cost role is ``cost_model``: its config, rows and every
    (batch, token costs) its program scored."""
    program = get_registry("algorithms")["safe_rlhf"].impl.program
    seen: list[tuple[Any, torch.Tensor]] = []
    original = program.score

    def recording(self: Any, batch: Any, signal: str = "reward") -> torch.Tensor:
        scores = original(self, batch, signal)
        if signal == "cost":
            seen.append((batch, scores))
        return scores

    monkeypatch.setattr(program, "score", recording)
    config = load_run_config(
        "safe_rlhf",
        None,
        [f"cost.model.model_path={cost_model}", "algorithm.lambda_update_delay=0", *overrides],
    )
    assert config.cost.model.model_path == str(cost_model)
    rows = Trainer(config, run_dir, quiet=True).fit()
    return config, rows, seen


def _check_costs_are_the_exports(
    cost_model: Path, config: Any, rows: list[dict], seen: list[tuple[Any, torch.Tensor]]
) -> None:
    assert len(seen) == len(rows)
    for (batch, token_costs), row in zip(seen, rows, strict=True):
        episode = token_costs.sum(dim=-1)
        expected = hf_sequence_scores(cost_model, batch)
        # The costs are the export's scores (float32, another batch layout: 1e-4).
        torch.testing.assert_close(episode, expected, atol=1e-4, rtol=1e-4)
        assert row["cost/mean"] == pytest.approx(float(expected.mean()), abs=1e-4)
    # The multiplier moved on those costs: J_c is the mean of the last window of them.
    all_costs = torch.cat([costs.sum(dim=-1) for _batch, costs in seen])
    window = all_costs[-config.algorithm.episode_cost_window :]
    assert rows[-1]["lagrange/mean_episode_cost"] == pytest.approx(float(window.mean()), abs=1e-4)


def test_a_cost_model_export_is_what_a_safe_rlhf_step_scores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The quick twin of the heavy test below: one cost-model step on four pairs, one
    # Safe-RLHF step on four prompts (the plumbing, not the learning).
    rows, export = _train_cost_model(
        tmp_path / "cost", 1, "data.batch_size=4", "reward_model.mini_batch_size=8",
        "reward_model.micro_batch_size=8", "reward_model.forward_micro_batch_size=8",
    )  # fmt: skip
    assert rows[0]["pairs/count"] == 4
    assert "ForSequenceClassification" in (export / "config.json").read_text()
    config, safe_rows, seen = _safe_rlhf_on(
        export, tmp_path / "safe", monkeypatch, "trainer.total_steps=1", "data.batch_size=4"
    )
    _check_costs_are_the_exports(export, config, safe_rows, seen)


@pytest.mark.slow
@pytest.mark.heavy
def test_safe_rlhf_runs_on_the_trained_cost_model(
    cost_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config, rows, seen = _safe_rlhf_on(
        cost_model, tmp_path / "safe", monkeypatch, "trainer.total_steps=2"
    )
    assert len(rows) == 2
    _check_costs_are_the_exports(cost_model, config, rows, seen)
