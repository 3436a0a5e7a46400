"""Validation samples from a seed of its own: turning it on leaves training's numbers alone.

The colocated actor's rollout samples from its worker's global torch generators, the ones
training's generations draw from; a call with ``meta['sampling_seed']`` (validation's) runs
seeded and restores them, a call without (training's) must not touch them.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest
import torch

from hfsdk.core.batch import Batch
from hfsdk.core.config import load_run_config
from hfsdk.core.trainer.trainer import Trainer
from hfsdk_testing import untimed_metrics
from hfsdk_testing.rng import RngForked, record_rng_forks

STEPS = 3
SMALL = [
    "data.batch_size=4",
    "algorithm.n_samples_per_prompt=2",
    "actor.mini_batch_size=4",
    "actor.micro_batch_size=8",
    "trainer.loggers=[jsonl]",
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


WORKERS = [
    ("hfsdk_backend_fsdp.fsdp_worker", "FSDPPolicyWorker"),
    ("hfsdk_backend_megatron.megatron_worker", "MegatronPolicyWorker"),
]


class _Rollout:
    """A collective rollout stand-in; the patched ``generate_rollout`` draws for it."""

    collective = True


def _policy_worker(monkeypatch: pytest.MonkeyPatch, module_name: str, cls_name: str) -> Any:
    """A rank-0 policy worker (no engine) whose generation records one random draw."""
    module = importlib.import_module(module_name)
    draws: list[float] = []

    def generate_rollout(rollout: Any, prompts: Batch) -> Batch:
        draws.append(float(torch.rand(())))
        return prompts

    monkeypatch.setattr(module, "generate_rollout", generate_rollout)
    cls = getattr(module, cls_name)
    worker = cls.__new__(cls)  # the worker context (rank 0 of 1) without building an engine
    worker.rollout = _Rollout()
    worker.draws = draws
    return worker


def _prompts(seed: int | None) -> Batch:
    meta = {} if seed is None else {"sampling_seed": seed}
    return Batch.from_dict(tensors={"x": torch.zeros(2)}, meta=meta)


@pytest.mark.parametrize(("module_name", "cls_name"), WORKERS)
def test_unseeded_generation_draws_on_from_the_workers_stream(
    monkeypatch: pytest.MonkeyPatch, module_name: str, cls_name: str
) -> None:
    """Training's calls: nothing forked, each call draws on where the last one stopped."""
    worker = _policy_worker(monkeypatch, module_name, cls_name)
    torch.manual_seed(3)
    expected = [float(torch.rand(())) for _ in range(2)]
    torch.manual_seed(3)
    for _ in range(2):
        worker.generate_sequences(_prompts(None))
    assert worker.draws == expected
    forked = record_rng_forks(monkeypatch)
    worker.generate_sequences(_prompts(None))
    assert forked == []


@pytest.mark.parametrize(("module_name", "cls_name"), WORKERS)
def test_seeded_generation_is_repeatable_and_leaves_the_workers_stream(
    monkeypatch: pytest.MonkeyPatch, module_name: str, cls_name: str
) -> None:
    worker = _policy_worker(monkeypatch, module_name, cls_name)
    torch.manual_seed(3)
    expected_next = float(torch.rand(()))
    torch.manual_seed(3)
    worker.generate_sequences(_prompts(11))
    worker.generate_sequences(_prompts(11))
    assert worker.draws[0] == worker.draws[1]  # the same seed, the same draws
    assert float(torch.rand(())) == expected_next  # the worker's stream did not move
    forked = record_rng_forks(monkeypatch)
    with pytest.raises(RngForked):  # on a GPU the CUDA generator is forked too
        worker.generate_sequences(_prompts(11))
    assert forked == [[0]]


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
