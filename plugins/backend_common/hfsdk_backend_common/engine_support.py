"""What every training backend's engines share: batch keys, devices, padding, metrics.

A backend's engines (fsdp, megatron, or a third party's) import these instead
of each other's, so two backends compute the same thing the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from hfsdk import Batch, HfsdkError, LossCounts, padding_rows

SEQUENCE_KEYS = ("input_ids", "attention_mask", "responses", "response_mask")
UPDATE_KEYS = (*SEQUENCE_KEYS, "advantages")

ENGINE_OF_ROLE_KIND = {
    "policy": "actor",
    "frozen_policy": "reference",
    "value": "critic",
    "scorer": "score",
    "score_model": "score_model",
}
"""Which engine kind serves each declared role kind (``hfsdk.ROLE_KINDS``)."""


def sampling_temperature(batch: Batch) -> float:
    """The temperature the responses were sampled with (``meta['temperature']``; 1 if greedy)."""
    temperature = float(batch.meta.get("temperature", 1.0))
    return temperature if temperature > 0 else 1.0


def resolve_device(name: str) -> torch.device:
    """``cpu``, ``cuda`` (the current CUDA device) or ``auto`` (CUDA when available)."""
    if name == "cuda" or (name == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise HfsdkError("device is 'cuda' but no CUDA device is visible; use 'cpu' or 'auto'")
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def finite_scores(scores: torch.Tensor) -> torch.Tensor:
    """A scoring model's ``scores``, refused when one is not finite (a NaN would become its
    whole group's advantage, and the update would train on it)."""
    bad = (~torch.isfinite(scores)).nonzero()
    if len(bad):
        raise HfsdkError(
            f"the scoring model gave sample {int(bad[0])} the non-finite score "
            f"{float(scores[bad[0]])}; check its weights (the role's model_path)"
        )
    return scores


def require_keys(batch: Batch, keys: Sequence[str], operation: str) -> None:
    """Raise a clear error naming the keys ``operation`` needs but ``batch`` lacks."""
    missing = [k for k in keys if k not in batch]
    if missing:
        raise HfsdkError(
            f"{operation} needs batch keys {missing} that are missing; the batch has "
            f"{sorted(batch.keys())} (run the earlier stages of the step first)"
        )


def without_padding_weight(batch: Batch) -> Batch:
    """``batch`` with the response mask of the dispatch's padding rows set to 0.

    The training dispatch repeats rows so every rank holds the same number; a
    zero mask keeps those duplicates out of the losses, the gradients and the
    global token/sequence counts. The caller's batch is not changed.
    """
    pad = padding_rows(batch)
    if pad == 0 or "response_mask" not in batch:
        return batch
    out = batch.index(slice(0, len(batch)))
    mask = out["response_mask"].clone()
    mask[len(batch) - pad :] = 0
    out["response_mask"] = mask
    return out


PAIR_ROWS = 2
"""The row group (``hfsdk.ROW_GROUP``) of a preference pair: chosen and rejected."""


def paired_roles(spec: Any) -> set[str]:
    """The trained roles of ``spec`` (a run's ``AlgorithmSpec``) whose batches' rows come in
    preference pairs that must stay whole (``hfsdk.ROW_GROUP``): a policy trained on pairs
    (DPO: its spec's ``default_data`` says so) and a score model (its loss is over
    Bradley-Terry pairs). Every backend checks their ``mini_batch_size`` at config load
    with :func:`check_minibatch_groups` and :data:`PAIR_ROWS`."""
    from hfsdk import TRAINED_KINDS

    pairs_policy = spec.default_data == "preference_pairs"
    return {
        role.name
        for role in spec.roles
        if role.kind == "score_model" or (pairs_policy and role.kind in TRAINED_KINDS)
    }


def check_minibatch_groups(role: str, mini_batch_size: int, dp_size: int, group: int) -> None:
    """Refuse a ``mini_batch_size`` that does not hold whole row groups on every rank.

    A batch whose rows come in groups (``hfsdk.row_group``: 2 for preference
    pairs) keeps each group in one mini-batch, so a rank's share of
    ``mini_batch_size`` would be rounded up to whole groups: fewer optimizer
    steps than configured, and a different count on different rank numbers.
    """
    step = group * dp_size
    if group > 1 and mini_batch_size % step:
        fixed = -(-mini_batch_size // step) * step
        raise HfsdkError(
            f"{role}.mini_batch_size={mini_batch_size} does not split into whole groups of "
            f"{group} rows (e.g. preference pairs) on each of the {dp_size} data-parallel "
            f"ranks; expected a multiple of {group} x {dp_size} = {step}; set "
            f"{role}.mini_batch_size to {fixed} (or another multiple of {step})"
        )


class MetricAccumulator:
    """Collects per-micro-batch metrics into one value per name.

    ``add_share`` values are a micro-batch's share of a mini-batch total (the
    losses, built from global counts): they are summed within a mini-batch.
    ``add_mean`` values are averaged. Both are then averaged over mini-batches;
    ``add_max`` values keep their maximum over the whole update. ``add_weighted``
    values are means over ``weight`` units (kept tokens, pairs, sequences) whose
    mini-batch total no rank knows in advance: each mini-batch's value is
    Σ value·weight / Σ weight. Ranks average shares and means (the core's
    ``collect_mean_metrics``); :meth:`gather` makes the weighted means and the
    maxima every rank's at once, so that average leaves them exact.
    """

    def __init__(self, dp_size: int = 1) -> None:
        self.dp_size = dp_size
        self._shares: dict[str, float] = {}
        self._per_minibatch: dict[str, list[float]] = {}
        self._means: dict[str, list[float]] = {}
        self._maxima: dict[str, float] = {}
        self._weighted: dict[str, tuple[float, float]] = {}
        # Per name: (mini-batch index, Σ value·weight, Σ weight) of each closed mini-batch.
        self._weighted_minibatches: dict[str, list[tuple[int, float, float]]] = {}
        self._minibatches = 0

    def add_share(self, name: str, value: float) -> None:
        """Add a micro-batch's share of a mini-batch total."""
        self._shares[name] = self._shares.get(name, 0.0) + value

    def add_token_share(self, name: str, value: float, tokens: float, counts: LossCounts) -> None:
        """Add a micro-batch's per-token mean as its token-weighted share × ``dp_size``.

        Summed over micro-batches and averaged over ranks this is the mean over
        every valid token of the mini-batch, however unevenly ranks hold them.
        """
        if tokens > 0 and counts.tokens > 0:
            self.add_share(name, value * tokens * self.dp_size / counts.tokens)
        else:
            self.add_share(name, 0.0)

    def add_weighted(self, name: str, value: float, weight: float) -> None:
        """Add a micro-batch's mean ``value`` over ``weight`` units (its kept tokens, pairs)."""
        total, units = self._weighted.get(name, (0.0, 0.0))
        self._weighted[name] = (total + value * weight, units + weight)

    def add_max(self, name: str, value: float) -> None:
        """Record a value whose maximum over the update is reported (e.g. ``is_weight_max``)."""
        self._maxima[name] = max(self._maxima.get(name, value), value)

    def add_mean(self, name: str, value: float) -> None:
        """Record a value to average."""
        self._means.setdefault(name, []).append(value)

    def end_minibatch(self) -> None:
        """Close the current mini-batch's totals."""
        for name, value in self._shares.items():
            self._per_minibatch.setdefault(name, []).append(value)
        self._shares = {}
        for name, (total, units) in self._weighted.items():
            entry = (self._minibatches, total, units)
            self._weighted_minibatches.setdefault(name, []).append(entry)
        self._weighted = {}
        self._minibatches += 1

    def gather(self, group: Any = None) -> None:
        """Sum the weighted totals of each mini-batch and take the maxima over ``group``'s
        ranks (every rank of it must call this). An object gather, not an all-reduce: ranks
        may hold different metric names (a loss reporting one only when it occurs)."""
        import torch.distributed as dist

        if not dist.is_initialized() or dist.get_world_size(group) == 1:
            return
        states: list[Any] = [None] * dist.get_world_size(group)
        dist.all_gather_object(states, self.rank_state(), group=group)
        self.take_ranks(states)

    def rank_state(self) -> tuple[dict[str, list[tuple[int, float, float]]], dict[str, float]]:
        """What :meth:`gather` exchanges: the closed mini-batches' weighted totals, the maxima."""
        return self._weighted_minibatches, self._maxima

    def take_ranks(self, states: Sequence[Any]) -> None:
        """Make the weighted totals and maxima those of every rank's :meth:`rank_state`
        (this one's among them): totals summed per mini-batch, maxima maxed."""
        totals: dict[str, dict[int, tuple[float, float]]] = {}
        maxima: dict[str, float] = {}
        for weighted, rank_maxima in states:
            for name, entries in weighted.items():
                per_minibatch = totals.setdefault(name, {})
                for index, total, units in entries:
                    old_total, old_units = per_minibatch.get(index, (0.0, 0.0))
                    per_minibatch[index] = (old_total + total, old_units + units)
            for name, value in rank_maxima.items():
                maxima[name] = max(maxima.get(name, value), value)
        self._weighted_minibatches = {
            name: [(index, *sums) for index, sums in sorted(per.items())]
            for name, per in totals.items()
        }
        self._maxima = maxima

    def result(self) -> dict[str, float]:
        """One float per metric name."""
        merged = {**self._per_minibatch, **self._means}
        out = {name: sum(values) / len(values) for name, values in merged.items() if values}
        for name, entries in self._weighted_minibatches.items():
            # A mini-batch with no units (every token dropped) has no mean: it is left out.
            values = [total / units for _index, total, units in entries if units > 0]
            out[name] = sum(values) / len(values) if values else 0.0
        return {**out, **self._maxima}
