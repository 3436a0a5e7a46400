"""Verified weight syncs: a cheap, exact fingerprint per tensor, and the comparison of what a
rollout holds against what the actor sent.

A fingerprint is ``(numel, bit_sum, samples)``: the sum of the tensor's raw bits read as
integers (int16 for 2-byte dtypes, int32 for 4-byte ones, ...), accumulated in int64 —
exact and independent of reduction order, so sender and receiver agree bit for bit on any
device and thread count, and any single changed element changes it — plus the raw bits of
a few elements at fixed positions. It costs one pass over the tensor, on its own device.

Senders fingerprint every tensor they send (a *manifest*, tagged with the weights version
it carries); receivers fingerprint what they hold after loading it and call
:func:`compare_manifest`. A dropped tensor shows as missing, old or partly written weights
as a mismatch; a skipped sync shows as a version behind the one expected
(:func:`check_version`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from hfsdk.core.errors import HfsdkError

if TYPE_CHECKING:
    import torch

Fingerprint = tuple[int, int, tuple[int, ...]]
SAMPLES = 4
_CHUNK = 1 << 22  # elements per int64 pass: bounds the temporary copy (32 MiB)


class WeightSyncMismatch(HfsdkError):
    """A rollout's weights after a sync differ from what the actor sent (or the sync was
    skipped): the first line names the step, how many tensors differ and the first one."""


def _bits(tensor: torch.Tensor) -> torch.Tensor:
    import torch

    flat = tensor.detach().contiguous().reshape(-1)
    as_int = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    return flat.view(as_int[flat.element_size()])


def _bit_sum(bits: torch.Tensor) -> int:
    import torch

    total = 0
    for start in range(0, bits.numel(), _CHUNK):
        total += int(bits[start : start + _CHUNK].to(torch.int64).sum())
    return total


def bit_sum(tensor: torch.Tensor) -> int:
    """The sum of ``tensor``'s raw bits read as integers: exact, and the same whatever the
    order, layout or packing of its elements, so the bit sums of several tensors add up to
    the bit sum of a tensor that holds them all (fused, transposed, zero-padded) — what a
    receiver that repacks the weights it loads can be checked with."""
    return _bit_sum(_bits(tensor))


def fingerprint(tensor: torch.Tensor) -> Fingerprint:
    """``(numel, sum of raw bits, raw bits at SAMPLES fixed positions)`` of ``tensor``."""
    import torch

    bits = _bits(tensor)
    numel = bits.numel()
    total = _bit_sum(bits)
    if not numel:
        return (0, 0, ())
    positions = sorted({(numel - 1) * i // max(SAMPLES - 1, 1) for i in range(SAMPLES)})
    samples = tuple(int(v) for v in bits[torch.tensor(positions, device=bits.device)].tolist())
    return (numel, total, samples)


def manifest(weights: Iterable[tuple[str, torch.Tensor]]) -> dict[str, Fingerprint]:
    """Name → fingerprint of every tensor of ``weights``."""
    return {name: fingerprint(tensor) for name, tensor in weights}


def compare_manifest(
    sent: Mapping[str, Fingerprint | int], held: Mapping[str, Fingerprint | int]
) -> str | None:
    """``None`` when ``held`` matches ``sent`` tensor for tensor, else one line saying what
    differs: tensors sent but not held (dropped), and tensors whose content differs (old or
    partly written weights), with the count and the first name of each. The values are
    fingerprints, or :func:`bit_sum` totals where the receiver keeps its own layout."""
    missing = sorted(set(sent) - set(held))
    differ = sorted(name for name in set(sent) & set(held) if sent[name] != held[name])
    problems = []
    if missing:
        problems.append(f"{len(missing)} tensor(s) sent but never loaded (first: {missing[0]!r})")
    if differ:
        problems.append(
            f"{len(differ)} of {len(sent)} tensor(s) differ from what was sent "
            f"(first: {differ[0]!r})"
        )
    return "; ".join(problems) or None


def check_version(held: int, expected: int, where: str) -> str | None:
    """One line when a rollout generated with weights of version ``held`` where it should have
    held ``expected`` (a skipped or lost sync), else ``None``."""
    if held == expected:
        return None
    return (
        f"{where} generated with weights version {held} where version {expected} was synced "
        "(a skipped or lost weight sync)"
    )


def require_loaded(loaded: int, current: int, engine: str) -> None:
    """Refuse to generate from ``engine`` when the weights version it loaded is not the
    actor's ``current`` one (a reload that was skipped): :class:`WeightSyncMismatch`."""
    if loaded != current:
        raise WeightSyncMismatch(
            f"{engine} holds the actor's weights version {loaded} but the actor is at version "
            f"{current}: a weight reload was skipped, and generating now would sample from "
            "stale weights; the rollout's update_weights must run after every update"
        )
