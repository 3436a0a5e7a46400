"""Validation samples from a seed of its own: turning it on leaves training's numbers alone.

The colocated actor's rollout samples from its worker's global torch generators, the ones
training's generations draw from; a call with ``meta['sampling_seed']`` (validation's) runs
seeded and restores them, a call without (training's) must not touch them (each backend's
``test_generation_seed.py`` checks its worker).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from hfsdk.core.batch import Batch
from hfsdk.core.config import load_run_config
from hfsdk.core.trainer.trainer import Trainer
from hfsdk_testing import SMALL_GRPO, untimed_metrics

STEPS = 3
SMALL = [
    *SMALL_GRPO,
    f"trainer.total_steps={STEPS}",
]


def _training_numbers(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every step's untimed metrics but validation's."""
    return [
        {k: v for k, v in untimed_metrics(r).items() if not k.startswith("val/")} for r in records
    ]


def _final_weights(run: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    path = run / "checkpoints" / f"step_{STEPS}" / "actor_hf" / "model.safetensors"
    return load_file(str(path))


@pytest.mark.slow
def test_sampled_validation_leaves_training_metrics_and_weights_unchanged(
    tmp_path: Path,
) -> None:
    records = {}
    for name, extra in (("plain", []), ("validated", ["trainer.val_every=2", "trainer.val_n=2"])):
        config = load_run_config("grpo", None, [*SMALL, *extra])
        records[name] = Trainer(config, tmp_path / name, quiet=True).fit()
    assert "val/pass@2" in records["validated"][1]  # it sampled validation before step 3
    plain, validated = _training_numbers(records["plain"]), _training_numbers(records["validated"])
    assert [row["step"] for row in plain] == [row["step"] for row in validated] == [1, 2, 3]
    for row_plain, row_validated in zip(plain, validated, strict=True):
        assert row_plain == row_validated, row_plain["step"]
    weights, weights_validated = (_final_weights(tmp_path / n) for n in ("plain", "validated"))
    assert weights.keys() == weights_validated.keys()
    for name, tensor in weights.items():
        assert torch.equal(tensor, weights_validated[name]), name
    assert plain[0]["actor/grad_norm"] != plain[-1]["actor/grad_norm"]  # the runs trained


def _prompts(seed: int | None) -> Batch:
    meta = {} if seed is None else {"sampling_seed": seed}
    return Batch.from_dict(tensors={"x": torch.zeros(2)}, meta=meta)


def test_validation_prompts_carry_a_sampling_seed_from_the_run_seed() -> None:
    from hfsdk.core.trainer.trainer_config import TrainerConfig
    from hfsdk_validation.validation import validate

    seen: list[Any] = []

    class _Algorithm:
        def generate(self, prompts: Batch, *, n: int, greedy: bool) -> Batch:
            seen.append(prompts.meta.get("sampling_seed"))
            return Batch.from_dict(
                tensors={"score": torch.ones(len(prompts) * n)},
                non_tensors={"response_text": ["r"] * (len(prompts) * n)},
            )

    prompts = _prompts(None)
    for seed in (1, 1, 2):
        trainer = TrainerConfig(seed=seed, val_n=2)
        validate(_Algorithm(), prompts, lambda batch: (batch["score"], {}), trainer)
    assert seen[0] is not None and seen[0] == seen[1] != seen[2]
    assert "sampling_seed" not in prompts.meta  # the caller's batch is left as it was
