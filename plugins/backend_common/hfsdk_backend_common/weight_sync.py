"""Weights from the actor's pool to a rollout pool: a bucketed broadcast over a group of their own.

The actor's rank 0 (which sees every weight as a full HF-named tensor through
``ActorSource.hf_weights``) and every rank of the rollout replicas form one
process group, built directly on a ``TCPStore`` (gloo on CPU, NCCL on GPU):
not the default group of either worker group, so neither role's collectives
are disturbed, and never through the controller or Ray's object store.

:func:`send_weights` packs consecutive tensors of one dtype into buckets of
at most ``bucket_bytes`` (a larger tensor is a bucket of its own) and
broadcasts each as: a header length, the header (names, shapes, offsets,
pickled), then one flat buffer; a zero length ends the stream, and a last blob
carries the manifest (the weights version and every sent tensor's fingerprint,
:mod:`hfsdk_backend_common.weight_check`) the receiver verifies what it loaded against.
:func:`receive_weights` copies every slice into the receiver's tensor of that
name. Both return their cost: ``sync/bytes``, ``sync/buckets``, ``sync/time_s``
and, on a receiver, ``sync/wait_s`` (how long it waited for the sender to start).
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import timedelta
from typing import Any

import attrs
import torch
import torch.distributed as dist

from hfsdk import BuiltinProtocol, HfsdkError, register
from hfsdk_backend_common.weight_check import (
    Fingerprint,
    ProbeCheck,
    compare_manifest,
    fingerprint,
    manifest,
)

DEFAULT_BUCKET_BYTES = 32 * 1024 * 1024
_PREFIX = "hfsdk_weight_sync"


@attrs.frozen(kw_only=True)
class SyncEndpoint:
    """Where the group's ``TCPStore`` listens and how many ranks join (rank 0: the sender)."""

    host: str
    port: int
    world_size: int


def open_store(host: str, world_size: int, timeout_s: float = 300.0) -> tuple[Any, SyncEndpoint]:
    """The group's ``TCPStore`` (this process serves it) on a free port of ``host``."""
    store = dist.TCPStore(
        host, 0, world_size, is_master=True, timeout=timedelta(seconds=timeout_s),
        wait_for_workers=False,
    )  # fmt: skip
    return store, SyncEndpoint(host=host, port=int(store.port), world_size=world_size)


class WeightSyncGroup:
    """This process's membership of the sync group (rank 0 sends, the others receive).

    ``store`` is the ``TCPStore`` from :func:`open_store` on the process that
    opened it; the others connect to ``endpoint``. Construction blocks until
    every rank has joined. ``device`` picks the backend: NCCL for CUDA, gloo
    otherwise.
    """

    def __init__(
        self,
        endpoint: SyncEndpoint,
        rank: int,
        *,
        device: torch.device | str = "cpu",
        store: Any = None,
        timeout_s: float = 300.0,
    ) -> None:
        self.endpoint = endpoint
        self.rank = rank
        self.device = torch.device(device)
        timeout = timedelta(seconds=timeout_s)
        if store is None:
            store = dist.TCPStore(
                endpoint.host, endpoint.port, endpoint.world_size, is_master=False,
                timeout=timeout,
            )  # fmt: skip
        self._store = store  # keeps the server alive on the opening process
        prefixed = dist.PrefixStore(_PREFIX, store)
        if self.device.type == "cuda":
            self.group: Any = dist.ProcessGroupNCCL(prefixed, rank, endpoint.world_size)
        else:
            options = dist.ProcessGroupGloo._Options()
            options._timeout = timeout
            options._devices = [dist.ProcessGroupGloo.create_default_device()]
            self.group = dist.ProcessGroupGloo(prefixed, rank, endpoint.world_size, options)

    def _broadcast(self, tensor: torch.Tensor) -> None:
        options = dist.BroadcastOptions()
        options.rootRank = 0
        self.group.broadcast([tensor], options).wait()

    def _send_blob(self, payload: bytes) -> None:
        length = torch.tensor([len(payload)], dtype=torch.int64, device=self.device)
        self._broadcast(length)
        if payload:
            data = torch.frombuffer(bytearray(payload), dtype=torch.uint8).to(self.device)
            self._broadcast(data)

    def _receive_blob(self) -> bytes:
        length = torch.zeros(1, dtype=torch.int64, device=self.device)
        self._broadcast(length)
        size = int(length.item())
        if not size:
            return b""
        data = torch.empty(size, dtype=torch.uint8, device=self.device)
        self._broadcast(data)
        return data.cpu().numpy().tobytes()

    def close(self) -> None:
        """Drop the group (the store closes with the last reference on its server)."""
        self.group = None
        self._store = None


def _bucket_flush(
    group: WeightSyncGroup, names: list[tuple[str, tuple[int, ...], int]], parts: list
) -> int:
    flat = torch.cat([p.reshape(-1) for p in parts]).to(group.device)
    header = pickle.dumps({"dtype": str(flat.dtype).removeprefix("torch."), "items": names})
    group._send_blob(header)
    group._broadcast(flat)
    return flat.numel() * flat.element_size()


def send_weights(
    group: WeightSyncGroup,
    weights: Iterable[tuple[str, torch.Tensor]],
    *,
    bucket_bytes: int = DEFAULT_BUCKET_BYTES,
    version: int = 0,
    fault: str | None = None,
    probes: Callable[[], Mapping[str, Any]] | None = None,
) -> dict[str, float]:
    """Broadcast every ``(name, tensor)`` of ``weights`` from rank 0, in buckets, then the
    manifest (``version``, each tensor's fingerprint and, from ``probes`` read once the
    stream ended, the sender's probes of the weights it computed: ``ActorSource.weight_probes``);
    its cost.

    ``fault="drop"`` (fault injection, ``sync_drop``) leaves the second tensor out of the
    stream while the manifest still lists it, as a sender that loses a tensor would.
    """
    if group.rank != 0:
        raise HfsdkError(f"send_weights runs on the sync group's rank 0, not rank {group.rank}")
    started = time.perf_counter()
    sent = buckets = 0
    names: list[tuple[str, tuple[int, ...], int]] = []
    parts: list[torch.Tensor] = []
    size = 0
    dtype = None
    sent_prints: dict[str, Fingerprint] = {}
    for index, (name, tensor) in enumerate(weights):
        tensor = tensor.detach()
        sent_prints[name] = fingerprint(tensor)
        if fault == "drop" and index == 1:
            continue
        nbytes = tensor.numel() * tensor.element_size()
        if parts and (tensor.dtype != dtype or size + nbytes > bucket_bytes):
            sent += _bucket_flush(group, names, parts)
            buckets += 1
            names, parts, size = [], [], 0
        # A copy: the tensor is only valid until the iterator advances (hf_weights' contract).
        parts.append(tensor.clone())
        names.append((name, tuple(tensor.shape), tensor.numel()))
        size += nbytes
        dtype = tensor.dtype
    if parts:
        sent += _bucket_flush(group, names, parts)
        buckets += 1
    group._send_blob(b"")  # the end of the stream
    derived = {} if probes is None else dict(probes())
    group._send_blob(pickle.dumps({"version": version, "manifest": sent_prints, "probes": derived}))
    return {
        "sync/bytes": float(sent),
        "sync/buckets": float(buckets),
        "sync/time_s": time.perf_counter() - started,
    }


def receive_stream(
    group: WeightSyncGroup, accept: Callable[[str, torch.Tensor], None]
) -> dict[str, float]:
    """Receive a :func:`send_weights` stream, handing each ``(name, full tensor)`` to ``accept``.

    The tensor is a view of the bucket's buffer, valid only during the call.
    Returns the ``sync/*`` cost (``sync/wait_s``: how long it waited for the sender), plus
    ``version`` (the weights version sent), ``manifest`` (the sender's fingerprints),
    ``probes`` (the sender's probes of the weights it computed, a LoRA merge) and ``wire``
    (the fingerprints of what arrived).
    """
    started = time.perf_counter()
    wait_s: float | None = None
    received = buckets = 0
    wire: dict[str, Fingerprint] = {}
    while True:
        header = group._receive_blob()
        if wait_s is None:
            wait_s = time.perf_counter() - started
        if not header:
            break
        meta = pickle.loads(header)
        total = sum(numel for _, _, numel in meta["items"])
        flat = torch.empty(total, dtype=getattr(torch, meta["dtype"]), device=group.device)
        group._broadcast(flat)
        offset = 0
        with torch.no_grad():
            for name, shape, numel in meta["items"]:
                tensor = flat[offset : offset + numel].view(shape)
                wire[name] = fingerprint(tensor)
                accept(name, tensor)
                offset += numel
        received += flat.numel() * flat.element_size()
        buckets += 1
    trailer = pickle.loads(group._receive_blob())
    return {
        "sync/bytes": float(received),
        "sync/buckets": float(buckets),
        "sync/time_s": time.perf_counter() - started,
        "sync/wait_s": float(wait_s or 0.0),
        "version": int(trailer["version"]),
        "manifest": trailer["manifest"],
        "probes": trailer.get("probes", {}),
        "wire": wire,
    }


def verify_sync(
    result: Mapping[str, Any],
    written: Mapping[str, Fingerprint] | None = None,
    held: Mapping[str, Fingerprint] | None = None,
) -> str | None:
    """``None`` when a received stream is whole (every tensor of the sender's manifest arrived
    unchanged) and what was ``written`` (the fingerprints of each tensor as the receiver
    stored it: its own dtype, its own slice) is what it ``held`` afterwards (read back from
    the weights it generates with); else one line saying what is wrong."""
    problem = compare_manifest(result["manifest"], result["wire"])
    if problem is None and written is not None and held is not None:
        problem = compare_manifest(written, held)
    return problem


def receive_weights(
    group: WeightSyncGroup, targets: Mapping[str, torch.Tensor], *, fault: str | None = None
) -> dict[str, Any]:
    """Receive a :func:`send_weights` stream into ``targets`` (name → tensor); its cost.

    Every name sent must be in ``targets`` with the same shape; a target left
    without a value is reported as ``missing`` in the result (a list of names), and
    ``mismatch`` is :func:`verify_sync`'s line on what ``targets`` hold afterwards (``None``:
    verified; it also names a merged weight, as held, that is not the merge of the factors the
    sender probed, counted in ``merges_verified``). ``fault="stale"`` (fault injection,
    ``sync_stale``) writes into copies of the targets, as a load that misses the live
    weights would: they keep the old values.
    """
    if fault == "stale":
        live, targets = targets, {name: t.clone() for name, t in targets.items()}
    filled: set[str] = set()
    written: dict[str, Fingerprint] = {}

    def accept(name: str, tensor: torch.Tensor) -> None:
        target = targets.get(name)
        if target is None or tuple(target.shape) != tuple(tensor.shape):
            found = None if target is None else tuple(target.shape)
            raise HfsdkError(
                f"weight sync: the actor sent {name!r} of shape {tuple(tensor.shape)}, the "
                f"rollout has {found}; the rollout must build the actor's architecture"
            )
        target.copy_(tensor)
        filled.add(name)
        written[name] = fingerprint(tensor if tensor.dtype == target.dtype else target)

    result: dict[str, Any] = dict(receive_stream(group, accept))
    result["missing"] = sorted(set(targets) - filled)
    if fault == "stale":
        targets = live
    held = manifest((name, targets[name]) for name in written)
    result["mismatch"] = verify_sync(result, written, held)
    # The weights the sender computed (a LoRA merge), as held now, against its probes.
    merges = ProbeCheck(lambda: result["probes"])
    for name in written:
        merges.observe(name, targets[name])
    problem = merges.problem()
    if problem is not None:
        result["mismatch"] = "; ".join(p for p in (result["mismatch"], problem) if p)
    result["merges_verified"] = merges.checked
    return result


class WeightSenderMixin:
    """The actor worker's side of the sync: mixed into a policy worker whose ``engine`` is an
    :class:`hfsdk.ActorSource` (its ``hf_weights`` are read collectively, rank 0 sends)."""

    engine: Any
    rank: int
    context: Any

    @register(protocol=BuiltinProtocol.RANK_ZERO)
    def open_weight_sync(self, world_size: int, timeout_s: float = 300.0) -> SyncEndpoint:
        """Serve the sync group's store on this node (rank 0); where the others connect."""
        self._sync_store, endpoint = open_store(self.context.node_ip, world_size, timeout_s)
        return endpoint

    @register(protocol=BuiltinProtocol.RANK_ZERO)
    def join_weight_sync(self, endpoint: SyncEndpoint, timeout_s: float = 300.0) -> int:
        """Join the sync group as its rank 0 (blocks until the replicas joined)."""
        self._sync_group = WeightSyncGroup(
            endpoint, 0, device=self.engine.device, store=self._sync_store, timeout_s=timeout_s
        )
        return 0

    @register(protocol=BuiltinProtocol.ONE_TO_ALL)
    def send_weights(
        self, bucket_bytes: int = DEFAULT_BUCKET_BYTES, version: int = 0, fault: str | None = None
    ) -> dict[str, float]:
        """Broadcast the current weights (the trainer's ``version``) to the replicas with their
        manifest; rank 0's ``sync/*`` metrics (``fault``: see :func:`send_weights`).

        When the broadcast fails (a replica died), rank 0 says so in ``sync/failed`` (the
        error's first line) instead of raising, so the controller can restart the replicas
        and open a new sync group while the actor keeps its state.
        """
        weights = self.engine.hf_weights()  # collective over the actor's ranks
        failure = "an earlier weight sync failed; the replicas need a new sync group"
        if self.rank == 0 and self._sync_group is not None:
            try:
                return send_weights(
                    self._sync_group,
                    weights,
                    bucket_bytes=bucket_bytes,
                    version=version,
                    fault=fault,
                    probes=lambda: self.engine.weight_probes,
                )
            except RuntimeError as exc:  # gloo/NCCL: a replica's connection broke
                failure = str(exc).splitlines()[0][:300]
                self._sync_group = None
        # The other ranks read hf_weights collectively with rank 0; after a failure rank 0
        # finishes reading with them and reports it instead of leaving them waiting.
        for _ in weights:
            pass
        return {"sync/failed": failure} if self.rank == 0 else {}
