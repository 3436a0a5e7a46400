"""Train -> generate and back: the micro-DP transition of the 3D-HybridEngine.

``to_generation`` builds this rank's generation shard (its slice of every
weight of its generation stage at tensor-parallel size tg) from its training
shard and broadcasts inside its micro-DP group only:

* a weight whose generation slice *is* the training slice (dg = 1 on that
  axis, or a norm the rank already holds) is the training tensor itself: no
  copy, no bytes; a weight every member holds (the norms when p = pg) is not
  sent at all, and a norm goes only to the members that lack it;
* otherwise the generation tensor is allocated once and every member's part
  lands directly in its rows (``dist.broadcast`` into a view), so there is
  no gather buffer and no reslicing copy. Fused weights (QKV, gate/up) are
  filled part by part, which is the re-split for tg != t. Weights split along
  dim 1 (row-parallel) are stored transposed so every member's slice is a
  contiguous block; the generation weight is a transposed view of it.

Every transition is verified on the receiving side: each member fingerprints
what it sends and what it receives (:mod:`hfsdk_backend_common.weight_check`), the
senders' fingerprints are gathered over the micro-DP group once at the end, and
a piece that arrived different from what was sent (or never arrived) raises
:class:`~hfsdk_backend_common.weight_check.WeightSyncMismatch` on every member, naming the
weight (``sync/verified`` in the metrics otherwise). Fault injection:
``HFSDK_FAULT_INJECT=reshard_drop:N`` zeroes the first piece a member receives in
its N-th transition, as a lost transfer would.

The optimizer state never moves. ``to_training`` drops the generation
tensors. Every rank receives exactly what it lacks: its generation shard minus
its training shard. A rank holds at most its training shard plus its
generation shard, and with ``lend_training`` (tg < t, the slices that are
copied) only its generation shard once the transition is done:

* ``lend_training=True``: once a training tensor's slice has been copied into
  its generation tensor, the training tensor's storage is released
  (``untyped_storage().resize_(0)``, the parameter object and every view of it
  stay valid) and ``to_training`` re-allocates it and copies the slice back
  (exact: a copy). The training tensors are unusable in between, so only a
  caller that neither trains nor reads them while generating may lend (the
  megatron hybrid rollout); tensors that share their storage with another
  tensor or cannot be resized are not lent. Peak extra memory is then the
  generation shard minus the training shard plus one weight's training slice
  (it is held until its slice is copied), and while generating a rank holds
  its generation shard only (HybridFlow's zero redundancy).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from hfsdk import HfsdkError, take_fault
from hfsdk_backend_common.hybrid.accounting import MemoryTracker, generation_specs
from hfsdk_backend_common.hybrid.layout import GenLayout, TrainLayout, place
from hfsdk_backend_common.hybrid.llama_format import ParamSpec
from hfsdk_backend_common.weight_check import Fingerprint, WeightSyncMismatch, fingerprint

if TYPE_CHECKING:
    import torch


@attrs.frozen
class ReshardStats:
    """What one transition cost this rank (the metrics it reports)."""

    seconds: float
    bytes_received: int
    peak_extra_bytes: int
    generation_bytes: int
    training_bytes: int
    collectives: int
    held_extra_bytes: int = 0
    """Memory beyond the training shard still held once the transition is done."""
    verified: int = 0
    """Pieces received and checked against the sender's fingerprint (0: nothing moved)."""

    def metrics(self) -> dict[str, float]:
        """The per-step metrics: ``timing/reshard_s``, ``perf/reshard_bytes``, peak extra
        memory, and ``sync/verified`` (1.0) when pieces moved and every one was verified."""
        out = {
            "timing/reshard_s": self.seconds,
            "perf/reshard_bytes": float(self.bytes_received),
            "perf/reshard_peak_extra_bytes": float(self.peak_extra_bytes),
        }
        if self.verified:
            out["sync/verified"] = 1.0
        return out


class HybridEngine:
    """Reshards one rank's actor weights between ``train`` and ``gen`` layouts.

    ``specs`` lists every weight of the model (see
    :func:`~hfsdk_backend_common.hybrid.llama_format.llama_specs`); ``micro_dp`` is
    this rank's micro-DP process group (``None`` when dg = 1), e.g. from
    :func:`~hfsdk_backend_common.hybrid.groups.create_groups`.
    """

    def __init__(
        self,
        *,
        train: TrainLayout,
        gen: GenLayout,
        specs: Sequence[ParamSpec],
        num_layers: int,
        rank: int,
        micro_dp: Any,
        lend_training: bool = False,
    ) -> None:
        self.train, self.gen, self.num_layers = train, gen, num_layers
        self.lend_training = lend_training
        # name -> (training tensor, its slice's views in the generation tensor, spec)
        self._lent: dict[str, tuple[torch.Tensor, list[torch.Tensor], ParamSpec]] = {}
        self._lendable: set[str] = set()
        self.place = place(train, gen, rank)
        self.micro_dp = micro_dp
        if gen.dg > 1 and micro_dp is None:
            raise HfsdkError(
                f"rank {rank}: generation layout {gen} needs a micro-DP group of {gen.dg} ranks "
                "but none was given; create it with hybrid.groups.create_groups"
            )
        self.specs = generation_specs(specs, train, gen, self.place.gen_stage, num_layers)
        a, b = train.p // gen.pg, train.t // gen.tg
        # Member m of the group is at stage gen_stage*a + m//b, tensor rank gen_tp*b + m%b.
        self._member_stage = [self.place.gen_stage * a + m // b for m in range(gen.dg)]
        self.shard: dict[str, torch.Tensor] = {}
        self.memory = MemoryTracker()
        self._owned: dict[str, int] = {}
        self.transitions = 0
        """Transitions started so far (numbers the ``reshard_drop`` fault)."""
        self._sent: dict[tuple, Fingerprint] = {}
        self._got: dict[tuple, tuple[int, Fingerprint]] = {}
        self._broadcasts = 0
        self._drop = False

    # -- train -> generate -------------------------------------------------------------
    def to_generation(self, training: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """This rank's generation shard, built from its training shard ``training``.

        Returns ``{name: tensor}`` for every weight of the generation stage at
        tensor-parallel size tg (tensors may be views of training tensors).
        Collective over the micro-DP group.
        """
        if self.shard:
            raise HfsdkError(
                "to_generation called twice without to_training; drop the generation shard first"
            )
        if self.lend_training:
            self._lendable = _exclusive(training)
        try:
            for name, tensor in self._transition(training, keep=True):
                self.shard[name] = tensor
        except BaseException:
            self.to_training()  # give back what was lent before failing
            raise
        finally:
            self._lendable = set()
        return self.shard

    def stream_generation(
        self, training: Mapping[str, torch.Tensor]
    ) -> Iterator[tuple[str, torch.Tensor]]:
        """:meth:`to_generation` one weight at a time, for a consumer that copies each weight.

        Yields ``(name, tensor)`` in the specs' (layer) order and keeps nothing:
        a received tensor is dropped once the consumer moves on, so the
        transition holds about one weight beyond the training shard (a separate
        engine such as vLLM keeps its own copy). :attr:`stats` is set when the
        iterator is exhausted. Collective over the micro-DP group: every
        member must consume the whole iterator.
        """
        if self.shard:
            raise HfsdkError(
                "stream_generation called while a generation shard is held; call to_training first"
            )
        yield from self._transition(training, keep=False)

    def _transition(
        self, training: Mapping[str, torch.Tensor], *, keep: bool
    ) -> Iterator[tuple[str, torch.Tensor]]:
        """Assemble every generation weight in order; ``keep``: count it as held afterwards."""
        started = time.perf_counter()
        self.memory.reset()
        self.bytes_received = 0
        self.collectives = 0
        self.transitions += 1
        self._sent, self._got, self._broadcasts = {}, {}, 0
        self._drop = take_fault("reshard_drop", self.transitions)
        train_bytes = sum(t.numel() * t.element_size() for t in training.values())
        if not training:
            raise HfsdkError(f"rank {self.place.rank}: the training shard is empty")
        first = next(iter(training.values()))
        self._dtype, self._device = first.dtype, first.device
        cuda_start = self._cuda_reset()
        gen_bytes = 0
        for spec in self.specs:
            held = self.memory.current
            tensor = self._assemble(spec, training)
            gen_bytes += tensor.numel() * tensor.element_size()
            yield spec.name, tensor
            if not keep:
                # The consumer has copied it: what this weight allocated is free again.
                self.memory.free(self.memory.current - held)
        verified = self._verify()
        peak = self.memory.peak
        if cuda_start is not None:
            import torch

            # On CUDA the allocator's own peak is the measure (it sees every buffer).
            peak = max(peak, torch.cuda.max_memory_allocated(self._device) - cuda_start)
        self.stats = ReshardStats(
            seconds=time.perf_counter() - started,
            bytes_received=self.bytes_received,
            peak_extra_bytes=peak,
            generation_bytes=gen_bytes,
            training_bytes=train_bytes,
            collectives=self.collectives,
            held_extra_bytes=self.memory.current,
            verified=verified,
        )

    def _verify(self) -> int:
        """Check every received piece against its sender's fingerprint; the pieces checked.

        Collective over the micro-DP group (two small object gathers): the senders'
        fingerprints go to every member, and the members agree on the verdict, so a
        mismatch raises on every rank at once (none is left waiting in a collective).
        """
        if self.micro_dp is None or self.gen.dg == 1:
            return 0
        import torch.distributed as dist

        sent: list[Any] = [None] * self.gen.dg
        dist.all_gather_object(sent, self._sent, group=self.micro_dp)
        bad = sorted(
            (key, src) for key, (src, got) in self._got.items() if sent[src].get(key) != got
        )
        mine = None
        if bad:
            (key, src) = bad[0]
            mine = (
                f"rank {self.place.rank} received {len(bad)} piece(s) that differ from what "
                f"was sent (first: {key[1]!r} from rank {self._global(src)})"
            )
        verdicts: list[Any] = [None] * self.gen.dg
        dist.all_gather_object(verdicts, mine, group=self.micro_dp)
        problems = [v for v in verdicts if v]
        if problems:
            raise WeightSyncMismatch(
                f"3D-HybridEngine transition {self.transitions} ({self.train} -> {self.gen}): "
                f"{problems[0]}; the generation weights are not the actor's"
            )
        return len(self._got)

    def _received(self, key: tuple, tensor: torch.Tensor, member: int) -> None:
        """Note a received piece's fingerprint (a ``reshard_drop`` fault loses the first)."""
        if self._drop:
            self._drop = False
            tensor.zero_()
        self._got[key] = (member, fingerprint(tensor))

    def _cuda_reset(self) -> int | None:
        """Start the CUDA allocator's peak count; the bytes allocated now (None off CUDA)."""
        if self._device.type != "cuda":
            return None
        import torch

        torch.cuda.reset_peak_memory_stats(self._device)
        return torch.cuda.memory_allocated(self._device)

    def to_training(self) -> None:
        """Give back lent training tensors (their slices copied back), then drop the shard."""
        import torch

        for local, parts, spec in self._lent.values():
            local.untyped_storage().resize_(local.numel() * local.element_size())
            sizes = [size // self.train.t for size in spec.part_sizes]
            for piece, source in zip(torch.split(local, sizes, dim=spec.split), parts, strict=True):
                piece.copy_(source)
        self._lent.clear()
        self.shard.clear()
        self._owned.clear()
        self.memory.reset()

    # -- one weight -------------------------------------------------------------------
    def _holders(self, spec: ParamSpec) -> list[int]:
        stage = spec.stage(self.train.p, self.num_layers)
        return [m for m, s in enumerate(self._member_stage) if s == stage]

    def _global(self, member: int) -> int:
        return self.place.group[member]

    def _broadcast(self, tensor: torch.Tensor, member: int, name: str) -> None:
        import torch.distributed as dist

        dist.broadcast(tensor, src=self._global(member), group=self.micro_dp)
        self.collectives += 1
        key = ("broadcast", name, self._broadcasts)  # the same count on every member
        self._broadcasts += 1
        if member != self.place.k:
            self.bytes_received += tensor.numel() * tensor.element_size()
            self._received(key, tensor, member)
        else:
            self._sent[key] = fingerprint(tensor)

    def _local(self, spec: ParamSpec, training: Mapping[str, torch.Tensor]) -> torch.Tensor:
        tensor = training.get(spec.name)
        if tensor is None:
            raise HfsdkError(
                f"rank {self.place.rank}: training shard has no {spec.name!r} although stage "
                f"{self.place.stage} holds it; the shard does not match the model's specs"
            )
        expected = spec.shard_shape(self.train.t)
        if tuple(tensor.shape) != expected:
            raise HfsdkError(
                f"rank {self.place.rank}: training tensor {spec.name!r} has shape "
                f"{tuple(tensor.shape)}, expected {expected} for layout {self.train}"
            )
        return tensor

    def _alloc(self, shape: tuple[int, ...], like: torch.Tensor | None, name: str) -> torch.Tensor:
        import torch

        dtype = like.dtype if like is not None else self._dtype
        device = like.device if like is not None else self._device
        tensor = torch.empty(shape, dtype=dtype, device=device)
        self.memory.alloc(tensor.numel() * tensor.element_size())
        return tensor

    def _assemble(self, spec: ParamSpec, training: Mapping[str, torch.Tensor]) -> torch.Tensor:
        holders = self._holders(spec)
        mine = self.place.k in holders
        local = self._local(spec, training) if mine else None
        if spec.split is None:
            return self._replicated(spec, holders, local)
        if len(holders) == 1:
            return self._whole(spec, holders[0], local)
        return self._parts(spec, holders, local)

    def _replicated(
        self, spec: ParamSpec, holders: list[int], local: torch.Tensor | None
    ) -> torch.Tensor:
        """A weight every tensor rank holds whole: only the members that lack it receive it.

        The holders are the ``b = t/tg`` members of the weight's training stage,
        one per *column* (members ``m`` with the same ``m % b``). Every member
        holds it when ``p = pg`` (nothing moves); with ``b = 1`` the one holder
        broadcasts to the micro-DP group (every other member lacks it); with
        ``b > 1`` each holder sends it to the lacking members of its column, so
        no holder receives a copy of what it has.
        """
        if len(holders) == self.gen.dg:
            return local
        if len(holders) == 1:
            if local is not None:
                self._broadcast(local, holders[0], spec.name)
                return local
            scratch = self._alloc(spec.shape, None, spec.name)
            self._broadcast(scratch, holders[0], spec.name)
            return scratch
        b = self.train.t // self.gen.tg
        column = self.place.k % b
        if local is not None:
            for member in range(self.gen.dg):
                if member % b == column and member not in holders:
                    self._send(local, member, spec.name)
            return local
        (src,) = [h for h in holders if h % b == column]
        scratch = self._alloc(spec.shape, None, spec.name)
        self._recv(scratch, src, spec.name)
        return scratch

    def _send(self, tensor: torch.Tensor, member: int, name: str) -> None:
        import torch.distributed as dist

        dist.send(tensor, dst=self._global(member), group=self.micro_dp)
        self.collectives += 1
        self._sent[("send", name, member)] = fingerprint(tensor)

    def _recv(self, tensor: torch.Tensor, member: int, name: str) -> None:
        import torch.distributed as dist

        dist.recv(tensor, src=self._global(member), group=self.micro_dp)
        self.collectives += 1
        self.bytes_received += tensor.numel() * tensor.element_size()
        self._received(("send", name, self.place.k), tensor, member)

    def _whole(self, spec: ParamSpec, src: int, local: torch.Tensor | None) -> torch.Tensor:
        """tg = t on this weight's axis: the generation slice is one member's training slice."""
        if self.gen.dg == 1:
            return local
        if local is not None:
            tensor = local.contiguous()
            self._broadcast(tensor, src, spec.name)
            return local
        tensor = self._alloc(spec.shard_shape(self.gen.tg), None, spec.name)
        self._broadcast(tensor, src, spec.name)
        return tensor

    def _parts(
        self, spec: ParamSpec, holders: list[int], local: torch.Tensor | None
    ) -> torch.Tensor:
        """Fill the generation slice part by part from the t/tg holders' slices (in place)."""
        import torch

        split = spec.split
        gen_shape = spec.shard_shape(self.gen.tg)
        # Store row-parallel weights transposed: then every block is a row range.
        stored_shape = gen_shape if split == 0 else (gen_shape[1], gen_shape[0], *gen_shape[2:])
        storage = self._alloc(stored_shape, local, spec.name)
        b = len(holders)
        gen_parts = [size // self.gen.tg for size in spec.part_sizes]
        local_parts = (
            torch.split(local, [size // self.train.t for size in spec.part_sizes], dim=split)
            if local is not None
            else None
        )
        offset = 0
        own_views: list[torch.Tensor] = []
        for index, gen_part in enumerate(gen_parts):
            block = gen_part // b
            for position, member in enumerate(holders):
                view = storage.narrow(0, offset + position * block, block)
                if member == self.place.k:
                    own = local_parts[index]
                    view.copy_(own if split == 0 else own.transpose(0, 1))
                    own_views.append(view if split == 0 else view.transpose(0, 1))
                self._broadcast(view, member, spec.name)
            offset += gen_part
        if local is not None and spec.name in self._lendable:
            self._lend(spec, local, own_views)
        return storage if split == 0 else storage.transpose(0, 1)

    def _lend(self, spec: ParamSpec, local: torch.Tensor, own_views: list[torch.Tensor]) -> None:
        """Release ``local``'s storage: its values now live in the generation tensor."""
        try:
            local.untyped_storage().resize_(0)
        except RuntimeError:  # e.g. memory-mapped from a file: keep it, it is only slower
            return
        self._lent[spec.name] = (local, own_views, spec)
        self.memory.free(local.numel() * local.element_size())


def _exclusive(training: Mapping[str, torch.Tensor]) -> set[str]:
    """Names of the training tensors that alone use their whole storage (safe to release)."""
    users: dict[int, int] = {}
    for tensor in training.values():
        ptr = tensor.untyped_storage().data_ptr()
        users[ptr] = users.get(ptr, 0) + 1
    return {
        name
        for name, t in training.items()
        if users[t.untyped_storage().data_ptr()] == 1
        and t.is_contiguous()
        and t.storage_offset() == 0
        and t.untyped_storage().nbytes() == t.numel() * t.element_size()
    }
