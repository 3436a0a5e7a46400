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
as a mismatch. (A skipped sync shows as a version behind the one expected: the trainer's
pipeline checks the version each generated batch reports.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from hfsdk import HfsdkError

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


def require_loaded(loaded: int, current: int, engine: str) -> None:
    """Refuse to generate from ``engine`` when the weights version it loaded is not the
    actor's ``current`` one (a reload that was skipped): :class:`WeightSyncMismatch`."""
    if loaded != current:
        raise WeightSyncMismatch(
            f"{engine} holds the actor's weights version {loaded} but the actor is at version "
            f"{current}: a weight reload was skipped, and generating now would sample from "
            "stale weights; the rollout's update_weights must run after every update"
        )


# -- derived tensors: a weight the actor computes (a LoRA merge), checked without redoing it --

LowRankProbe = tuple["torch.Tensor", "torch.Tensor", float]
"""``(expected, tolerance, eps)``: what a weight computed as ``base + scale·(B @ A)`` must give
times :func:`probe_input` (float64, one value per row of the weight as stored), how far an
exact product of the weight as sent may be from it (float64, per row), and the machine
epsilon of the dtype it was sent in (a receiver that keeps a coarser one adds its rounding)."""

_PROBE_SEED = 0x5EED
_SIGMAS = 8.0
"""Rounding errors of a cast, summed against the ±1 probe, stay within this many times their
largest possible standard deviation (Hoeffding: exceeded with probability below 1e-13 a row)."""


def probe_input(columns: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """The fixed ±1 vector (float64) a stored 2-D weight of ``columns`` columns is multiplied
    by: the same on every process, and exact in every dtype (no rounding of the input).
    Drawn on the CPU (the same values on every device), then put on ``device``: the weight's."""
    import torch

    generator = torch.Generator().manual_seed(_PROBE_SEED + columns)
    vector = torch.randint(0, 2, (columns,), generator=generator).double() * 2 - 1
    return vector.to(device)


def _cast_bound(eps: float, row_norms: torch.Tensor) -> torch.Tensor:
    """What rounding each element of a row to a dtype of machine epsilon ``eps`` (at most half
    an ulp, ``eps/2`` of the element) moves the row's product with the ±1 probe by."""
    return _SIGMAS * (eps / 2) * row_norms


def low_rank_probe(
    base: torch.Tensor,
    down: torch.Tensor,
    up: torch.Tensor,
    scale: float,
    *,
    transposed: bool = False,
    dtype: torch.dtype,
) -> LowRankProbe:
    """The probe of ``base + scale·(up @ down)`` (``up`` (out, r), ``down`` (r, in); with
    ``transposed`` the update is added transposed, as a weight stored ``(in, out)`` takes it),
    computed from the factors without forming ``up @ down``: an independent way to the same
    product as the merged weight's. ``dtype``: the merged weight's dtype as sent.

    The tolerance covers the float32 merge (a worst-case bound on the rank-r products and the
    addition) and the cast to ``dtype`` (:data:`_SIGMAS` times the rounding's standard
    deviation, from a bound on the merged row's norm). A wrong scale, a missing or
    untransposed update, another module's factors: each is caught once it moves a row's
    product several times further than the cast's rounding does. Measured on an 896×896
    weight: in float32 an update of 0.5% of the weight's norm is caught; in bfloat16 one
    of 0.5% (moving W·x by 0.58%, 3.6× bfloat16's own rounding of 0.16%) is not, and one
    from about 1% is.
    """
    import torch

    x = probe_input(base.shape[1], base.device)
    base64, down64, up64 = base.double(), down.double(), up.double()
    ones = torch.ones_like(x)
    if transposed:  # stored (in, out): (up @ down).T @ x = down.T @ (up.T @ x)
        update = down64.T @ (up64.T @ x)
        update_abs = down64.abs().T @ (up64.abs().T @ ones)
        update_norms = down64.T.abs() @ up64.norm(dim=0)  # ||row j of (up@down).T||
    else:
        update = up64 @ (down64 @ x)
        update_abs = up64.abs() @ (down64.abs() @ ones)
        update_norms = up64.abs() @ down64.norm(dim=1)
    expected = base64 @ x + scale * update
    eps32 = torch.finfo(torch.float32).eps
    eps = torch.finfo(dtype).eps
    rank = down.shape[0]
    merge = (rank + 2) * eps32 * abs(scale) * update_abs + eps32 * (base64.abs() @ ones)
    row_norms = base64.norm(dim=1) + abs(scale) * update_norms
    tolerance = 2 * merge + _cast_bound(eps, row_norms)
    return expected, tolerance, eps


def check_probe(name: str, held: torch.Tensor, probe: LowRankProbe) -> str | None:
    """``None`` when ``held`` (the weight as a receiver stores it) times :func:`probe_input`
    is the probe's expected product within its tolerance (plus ``held``'s own rounding, when
    the receiver keeps a coarser dtype than was sent), else one line naming the weight and
    the gap."""
    import torch

    expected, tolerance, sent_eps = probe
    matrix = held.detach().double().reshape(held.shape[0], -1)
    if matrix.shape[0] != expected.numel():
        return f"{name!r} has {matrix.shape[0]} rows where its merge has {expected.numel()}"
    got = matrix @ probe_input(matrix.shape[1], matrix.device)
    expected, slack = expected.to(matrix.device), tolerance.to(matrix.device)
    held_eps = torch.finfo(held.dtype).eps
    if held_eps > sent_eps:
        slack = slack + _cast_bound(held_eps, matrix.norm(dim=1))
    gap = (got - expected).abs()
    if bool((gap <= slack).all()):
        return None
    worst = int(torch.argmax(gap / slack))
    return (
        f"{name!r} is not the merge of its base weight and adapter (row {worst}: "
        f"|W·x − expected| = {float(gap[worst]):.3g} > tolerance {float(slack[worst]):.3g})"
    )


class ProbeCheck:
    """A receiver's check of the derived weights it is sent (a LoRA merge), tensor by tensor.

    ``probes`` is the sender's ``ActorSource.weight_probes`` (read at each call: the sender
    fills it while its stream runs). :meth:`observe` each weight as the receiver holds it;
    :meth:`problem` says what failed.
    """

    def __init__(self, probes: Callable[[], Mapping[str, LowRankProbe]]) -> None:
        self._probes = probes
        self.checked = 0
        self.failures: list[str] = []
        self._seen: set[str] = set()

    def observe(self, name: str, held: torch.Tensor) -> None:
        """Check ``held`` when the sender computed ``name`` (else nothing to check)."""
        probe = self._probes().get(name)
        if probe is None:
            return
        self.checked += 1
        self._seen.add(name)
        line = check_probe(name, held, probe)
        if line is not None:
            self.failures.append(line)

    def problem(self) -> str | None:
        """One line on the merged weights that are not their merge, or that the sender probed
        but the receiver never got (``None``: all arrived and are their merge)."""
        probed = list(self._probes())
        lost = [name for name in probed if name not in self._seen]
        problems = []
        if self.failures:
            problems.append(
                f"{len(self.failures)} of {self.checked} merged weight(s) wrong: {self.failures[0]}"
            )
        if lost:  # a merged weight left out of the stream: the receiver keeps its old one
            problems.append(
                f"{len(lost)} of {len(probed)} merged weight(s) never arrived (first: {lost[0]!r})"
            )
        return "; ".join(problems) or None
