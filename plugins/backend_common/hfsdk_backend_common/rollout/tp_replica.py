"""A rollout replica of ``pg`` pipeline stages of ``tg`` tensor-parallel ranks each.

Set by ``placement.pools.rollout.tp`` (tg) and ``.pp`` (pg). The rollout
pool's ranks form replicas of ``pg * tg`` consecutive ranks, stage-major
(:func:`rank_layout`: replica ``rank // (pg*tg)``, stage ``local // tg``,
tensor rank ``local % tg`` of ``local = rank % (pg*tg)``), so a stage's tensor
group is ``tg`` consecutive ranks. A stage holds only its ``num_layers / pg``
consecutive decoder layers (the first stage also the embedding, the last the
final norm and output layer: :func:`stage_names`) and of those only its
megatron-format tensor-parallel slice of every weight
(:mod:`hfsdk_backend_common.hybrid.llama_format`: grouped QKV and fused
gate/up column parallel, proj and fc2 row parallel, embedding and output
layer vocabulary parallel over the vocabulary padded to a multiple of ``tg``,
norms replicated). To the rollout backend the rank is an
:class:`hfsdk.ActorSource` whose :meth:`TPReplicaSource.generation_shards`
returns :class:`ReplicaShards`, so the ``hf`` rollout takes its shard path
and decodes with ``TPDecoder`` over the stage's tensor group, hidden states
passed stage to stage (:class:`~hfsdk_backend_common.hybrid.stages.StageLink`
over the pipeline group of the ranks with the same tensor rank); all
``pg * tg`` ranks of the replica pool their prompts and each keeps its own
rows (:class:`~hfsdk_backend_common.hybrid.row_pool.RowPool`).

**Weight sync.** The actor's rank 0 still broadcasts every weight as a full
HF-named tensor (:mod:`hfsdk_backend_common.weight_sync`): the wire carries
full tensors to every replica rank. :func:`receive_slices` converts each
megatron weight of its stage as soon as its HF sources arrived and keeps only
this rank's slice (a layer's q/k/v or gate/up are held whole until the last of
them arrives; tensors of other stages are dropped on arrival). Sending each
rank only its slices is future work.

**Behaviour log-probs** (:func:`tp_log_probs`): one staged ``TPDecoder``
forward over prompt + response on the slices (vocabulary-parallel logits
gathered on the last stage, whose log-probs are broadcast to the other
stages), the replica's rows pooled like the prompts.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs
import torch

from hfsdk import (
    DataParallelInfo,
    HfsdkError,
    load_tokenizer,
    position_ids_from_mask,
)
from hfsdk_backend_common.engine_support import sampling_temperature
from hfsdk_backend_common.hybrid.decoder import DecoderShape, KVCache, TPDecoder
from hfsdk_backend_common.hybrid.llama_format import (
    LlamaShape,
    ParamSpec,
    hf_llama_shape,
    hf_llama_to_megatron,
    hf_sources,
    llama_specs,
    megatron_weight,
    tp_slice,
)
from hfsdk_backend_common.hybrid.row_pool import PooledRowsShards, RowPool
from hfsdk_backend_common.hybrid.shards import GenerationShards
from hfsdk_backend_common.hybrid.stages import StageLink
from hfsdk_backend_common.hybrid.support import tp_support_problems
from hfsdk_backend_common.token_ops import response_log_probs
from hfsdk_backend_common.weight_check import Fingerprint, fingerprint

_LAYER = re.compile(r"decoder\.layers\.\d+\.")
_VOCAB_PARALLEL = ("embedding.word_embeddings.weight", "output_layer.weight")


def pool_key(tg: int, pg: int = 1) -> str:
    """How the config spells the setting (error messages)."""
    if pg == 1:
        return f"placement.pools.rollout.tp={tg}"
    return f"placement.pools.rollout (tp={tg}, pp={pg})"


def rank_layout(rank: int, world: int, tg: int, pg: int = 1) -> tuple[int, int, int]:
    """``(replica, stage, tp_rank)`` of rollout rank ``rank`` (stage-major replicas).

    A replica is ``pg * tg`` consecutive ranks; its stage ``s`` holds the
    ``tg`` consecutive ranks ``s * tg ..`` of it.
    """
    size = tg * pg
    if tg < 1 or pg < 1 or world % size:
        raise HfsdkError(
            f"{pool_key(tg, pg)}: tp*pp={size} does not divide the rollout pool's {world} "
            "ranks; choose a divisor"
        )
    local = rank % size
    return rank // size, local // tg, local % tg


@attrs.frozen(kw_only=True)
class ReplicaGroups:
    """This rank's process groups in its replica (``None`` where a group has one rank).

    ``replica``: all ``pg * tg`` ranks (the prompts are pooled over it; this rank is
    ``local`` of them);
    ``tensor`` / ``tp_ranks``: the stage's tensor group and its global ranks;
    ``stages``: the pipeline link over the ranks of this tensor rank, in stage order.
    """

    replica: Any
    replica_ranks: tuple[int, ...]
    local: int
    tensor: Any
    tp_ranks: tuple[int, ...]
    stages: StageLink | None


def replica_groups(rank: int, world: int, tg: int, pg: int = 1) -> ReplicaGroups:
    """This rank's replica, tensor and pipeline groups (collective: every rank calls it).

    ``new_group`` is collective over the rollout group's world, so every rank
    creates every replica's groups in the same order and keeps its own.
    """
    import torch.distributed as dist

    size = tg * pg
    replica, stage, tp_rank = rank_layout(rank, world, tg, pg)
    mine: dict[str, Any] = {}
    for r in range(world // size):
        base = r * size
        members = tuple(range(base, base + size))
        group = dist.new_group(list(members)) if size > 1 else None
        if r == replica:
            mine["replica"] = (group, members)
        for s in range(pg) if tg > 1 else ():
            members = tuple(range(base + s * tg, base + (s + 1) * tg))
            group = dist.new_group(list(members))
            if (r, s) == (replica, stage):
                mine["tensor"] = (group, members)
        for t in range(tg) if pg > 1 else ():
            members = tuple(base + s * tg + t for s in range(pg))
            group = dist.new_group(list(members))
            if (r, t) == (replica, tp_rank):
                mine["stages"] = StageLink(ranks=members, rank=rank, group=group)
    tensor, tp_ranks = mine.get("tensor", (None, (rank,)))
    return ReplicaGroups(
        replica=mine["replica"][0], replica_ranks=mine["replica"][1],
        local=mine["replica"][1].index(rank), tensor=tensor,
        tp_ranks=tp_ranks, stages=mine.get("stages"),
    )  # fmt: skip


def stage_names(specs: Sequence[ParamSpec], num_layers: int, stage: int, pg: int) -> list[str]:
    """The megatron weights generation stage ``stage`` of ``pg`` holds (what ``TPDecoder``
    expects): its ``num_layers / pg`` consecutive layers (global numbers), the embedding
    on the first stage, the final norm and output layer on the last."""
    per = num_layers // pg
    layers = {f"decoder.layers.{i}." for i in range(stage * per, (stage + 1) * per)}
    ends = set()
    if stage == 0:
        ends.add("embedding.word_embeddings.weight")
    if stage == pg - 1:
        ends |= {"decoder.final_layernorm.weight", "output_layer.weight"}
    names = []
    for spec in specs:
        layer = _LAYER.match(spec.name)
        if spec.name in ends or (layer is not None and layer.group(0) in layers):
            names.append(spec.name)
    return names


def stage_problems(num_layers: int, pg: int, *, where: str) -> list[str]:
    """Why ``num_layers`` cannot be split into ``pg`` stages (empty: it can)."""
    if num_layers % pg:
        return [
            f"{where} splits the model's {num_layers} layers into {pg} generation stages, "
            "which does not divide them; choose a pp that divides num_hidden_layers"
        ]
    return []


def slice_weight(full: torch.Tensor, spec: ParamSpec, tg: int, tp_rank: int) -> torch.Tensor:
    """Tensor rank ``tp_rank``'s slice of a full megatron-format weight.

    The vocabulary-parallel weights are padded with zero rows to a multiple
    of ``tg`` first, so every rank holds the same number of rows (``TPDecoder``
    cuts the gathered logits back to the real vocabulary).
    """
    if spec.name in _VOCAB_PARALLEL and full.shape[0] % tg:
        rows = -(-full.shape[0] // tg) * tg
        full = torch.nn.functional.pad(full, (0, 0, 0, rows - full.shape[0]))
        return full.chunk(tg)[tp_rank].contiguous()  # one part: its rows block
    return tp_slice(full, spec, tg, tp_rank)


def megatron_slices(
    state: Mapping[str, torch.Tensor],
    shape: LlamaShape,
    tg: int,
    tp_rank: int,
    *,
    stage: int = 0,
    pg: int = 1,
) -> dict[str, torch.Tensor]:
    """This rank's slices of its stage's weights of an HF Llama state dict (full tensors in)."""
    full = hf_llama_to_megatron(state, shape)
    specs = {s.name: s for s in llama_specs(shape)}
    names = stage_names(list(specs.values()), shape.num_layers, stage, pg)
    return {n: slice_weight(full[n], specs[n], tg, tp_rank) for n in names}


class SliceReceiver:
    """Turns a stream of full HF-named tensors into this rank's megatron slices, in place.

    :meth:`accept` is :func:`~hfsdk_backend_common.weight_sync.receive_stream`'s
    callback: an HF tensor is copied into a temporary until every source of its
    megatron weight has arrived, then that weight is built, sliced and written
    into ``slices`` (the temporaries dropped). Only the weights ``slices``
    holds (this rank's stage) are built; an HF tensor feeding none of them is
    dropped on arrival.
    """

    def __init__(
        self,
        slices: Mapping[str, torch.Tensor],
        shape: LlamaShape,
        *,
        tg: int,
        tp_rank: int,
        tied: bool,
        lose_first_write: bool = False,
    ) -> None:
        self.slices, self.shape, self.tg, self.tp_rank = slices, shape, tg, tp_rank
        self.lose_first_write = lose_first_write
        """Fault injection (``slice_drop``): the first slice is not written but counted as
        written, as a copy that never reached the live tensor."""
        self.specs = {s.name: s for s in llama_specs(shape)}
        self.sources = hf_sources(shape, tied=tied)
        self.known = {hf for needed in self.sources.values() for hf in needed}
        self.users: dict[str, list[str]] = {}
        for name, needed in self.sources.items():
            if name not in slices:  # another stage's weight
                continue
            for hf in needed:
                self.users.setdefault(hf, []).append(name)
        self.pending: dict[str, torch.Tensor] = {}
        self.filled: set[str] = set()
        self.written: dict[str, Fingerprint] = {}
        """Fingerprint of each slice as written (what a read-back must find)."""

    def accept(self, name: str, tensor: torch.Tensor) -> None:
        """One full HF tensor from the wire (a view valid only during the call)."""
        if name not in self.known:
            raise HfsdkError(
                f"weight sync: the actor sent {name!r}, which the tensor-parallel rollout "
                "replica has no slice for; the rollout must build the actor's architecture"
            )
        if name not in self.users:  # only other stages hold weights built from it
            return
        self.pending[name] = tensor.clone()
        for target in self.users[name]:
            needed = self.sources[target]
            if all(hf in self.pending for hf in needed):
                full = megatron_weight(target, tuple(self.pending[hf] for hf in needed), self.shape)
                piece = slice_weight(full, self.specs[target], self.tg, self.tp_rank)
                if tuple(piece.shape) != tuple(self.slices[target].shape):
                    raise HfsdkError(
                        f"weight sync: {target!r} sliced to {tuple(piece.shape)} but the replica "
                        f"holds {tuple(self.slices[target].shape)}; the actor's architecture "
                        "differs from the rollout's"
                    )
                if self.lose_first_write:
                    self.lose_first_write = False
                else:
                    self.slices[target].copy_(piece)
                self.filled.add(target)
                # What was meant to be written, in the slice's dtype (what copy_ rounds to).
                self.written[target] = fingerprint(piece.to(self.slices[target].dtype))
        # Drop the sources no unfilled megatron weight still waits for.
        for hf in list(self.pending):
            if all(t in self.filled for t in self.users[hf]):
                del self.pending[hf]

    def missing(self) -> list[str]:
        """Megatron weights the stream left unset."""
        return sorted(set(self.slices) - self.filled)


class ReplicaShards(PooledRowsShards, GenerationShards):
    """A replica rank's slices (its stage's, its tensor slice) as the rollout contract's shards.

    The slices are the replica's own (the weight sync writes them in place):
    :meth:`weights` hands them out as they are and :meth:`release` keeps them.
    ``groups.stages`` is ``None`` at pg = 1.
    """

    def __init__(
        self,
        slices: dict[str, torch.Tensor],
        shape: DecoderShape,
        *,
        tg: int,
        pg: int,
        tp_rank: int,
        groups: ReplicaGroups,
    ) -> None:
        self.slices, self.shape = slices, shape
        self.tg, self.pg, self.tp_rank = tg, pg, tp_rank
        self.tp_group, self.tp_ranks, self.stages = groups.tensor, groups.tp_ranks, groups.stages
        self.rows = RowPool(
            tg=len(groups.replica_ranks), tp_rank=groups.local, tp_group=groups.replica
        )

    def weights(self) -> Mapping[str, torch.Tensor]:
        """The replica rank's slices (no transition: they are held between calls)."""
        return self.slices

    def release(self) -> None:
        """Nothing to drop: the slices are the replica's weights."""

    def metrics(self) -> dict[str, float]:
        """No resharding happens on a replica."""
        return {}

    def decoder(self) -> TPDecoder:
        """A ``TPDecoder`` over the slices, the stage's tensor group and the pipeline link."""
        return TPDecoder(
            self.slices, self.shape, tg=self.tg, tp_rank=self.tp_rank, tp_group=self.tp_group,
            tp_ranks=self.tp_ranks, stages=self.stages,
        )  # fmt: skip


class TPReplicaSource:
    """One rank of a tensor-parallel / pipelined rollout replica as an :class:`hfsdk.ActorSource`.

    Loads the actor's model once to cut its stage's slices, then drops it. Only
    :meth:`generation_shards` serves generation: a rollout that asks for full
    weights (:meth:`hf_weights`, :meth:`live_hf_module`) is refused.
    """

    def __init__(
        self,
        model_path: str,
        tokenizer_path: str,
        *,
        device: torch.device,
        dtype: torch.dtype,
        dp: DataParallelInfo,
        tg: int,
        rank: int,
        world: int,
        pg: int = 1,
    ) -> None:
        from transformers import AutoModelForCausalLM

        self.model_path = model_path
        self.tokenizer = load_tokenizer(tokenizer_path)
        self.device, self.compute_dtype, self.dp, self.tg, self.pg = device, dtype, dp, tg, pg
        module = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype)
        self.hf_config = module.config
        where = pool_key(tg, pg)
        problems = tp_support_problems(
            self.hf_config.to_dict(), tg, where=where, fix="set placement.pools.rollout.tp: 1"
        ) + stage_problems(self.hf_config.num_hidden_layers, pg, where=where)
        if problems:
            raise HfsdkError(problems[0])
        configured = module.generation_config.eos_token_id
        self.generation_eos_ids: list[int] = (
            [] if configured is None else [configured] if isinstance(configured, int)
            else list(configured)
        )  # fmt: skip
        self.llama_shape = hf_llama_shape(self.hf_config)
        state = {name: p.detach() for name, p in module.named_parameters()}
        self.tied = "lm_head.weight" not in state
        _, stage, tp_rank = rank_layout(rank, world, tg, pg)
        slices = {
            name: t.to(device) for name, t in megatron_slices(
                state, self.llama_shape, tg, tp_rank, stage=stage, pg=pg
            ).items()
        }  # fmt: skip
        del module, state
        self.shards = ReplicaShards(
            slices, DecoderShape.from_hf_config(self.hf_config), tg=tg, pg=pg, tp_rank=tp_rank,
            groups=replica_groups(rank, world, tg, pg),
        )  # fmt: skip
        self.shards_taken = False
        self.weights_version = 0
        self.last_weights_metrics: dict[str, float] = {}
        self.weight_probes: dict[str, Any] = {}  # sends only what it holds

    def _refuse(self, what: str) -> HfsdkError:
        return HfsdkError(
            f"{pool_key(self.tg, self.pg)}: the rollout asked for {what}, but a tensor-parallel "
            "or pipelined replica holds only its slices; use rollout.backend: hf with the hfsdk "
            "decoder, or tp: 1 and pp: 1"
        )

    def hf_weights(self) -> Iterator[tuple[str, torch.Tensor]]:
        """Refused: the replica holds slices, not full HF tensors."""
        raise self._refuse("full HF weights")

    @contextlib.contextmanager
    def live_hf_module(self, *, gather: bool = False) -> Iterator[torch.nn.Module]:
        """Refused: the replica holds no HF module."""
        raise self._refuse("an HF module")
        yield  # pragma: no cover

    def generation_shards(self, config: Any) -> ReplicaShards:
        """The replica rank's slices as generation shards (the ``hf`` rollout's shard path)."""
        self.shards_taken = True
        return self.shards

    def receiver(self, *, lose_first_write: bool = False) -> SliceReceiver:
        """A receiver writing a weight-sync stream into this rank's slices (``lose_first_write``:
        fault injection, see :class:`SliceReceiver`)."""
        return SliceReceiver(
            self.shards.slices, self.llama_shape, tg=self.tg, tp_rank=self.shards.tp_rank,
            tied=self.tied, lose_first_write=lose_first_write,
        )  # fmt: skip

    def log_probs(self, batch: Any) -> torch.Tensor:
        """Behaviour log-probs (B, R) of ``batch``'s responses (collective over the replica)."""
        return tp_log_probs(self.shards, batch, pad_id=self.tokenizer.pad_token_id)

    def digest(self) -> dict[str, float]:
        """Each slice's sum (this rank's)."""
        return {n: float(t.double().sum()) for n, t in self.shards.slices.items()}


def tp_log_probs(shards: ReplicaShards, batch: Any, *, pad_id: int) -> torch.Tensor:
    """Temperature-scaled log-probs (B, R) of ``batch``'s responses on the replica's slices.

    The replica's ranks pool their rows, run one ``TPDecoder`` forward over
    prompt + response (stage to stage; the last stage's logits gathered over
    the vocabulary), the last stage broadcasts the log-probs along each
    pipeline group and every rank keeps its own rows; 0 where the response is masked.
    """
    ids, mask, (responses, response_mask) = shards.prompt_rows(
        batch["input_ids"], batch["attention_mask"], pad_id,
        [batch["responses"], batch["response_mask"]],
    )  # fmt: skip
    decoder = shards.decoder()
    device = next(iter(shards.slices.values())).device
    ids, mask = ids.to(device), mask.to(device)
    with torch.no_grad():
        t = ids.shape[1]
        keys = mask.bool()
        causal = torch.ones(t, t, dtype=torch.bool, device=device).tril()
        attend = causal[None, None] & keys[:, None, None, :]
        # A padded query row would attend nothing; let it see itself (its output is unused).
        attend = attend | torch.eye(t, dtype=torch.bool, device=device)[None, None]
        logits = decoder.forward(ids, position_ids_from_mask(mask), attend, KVCache(capacity=t))
        if logits is not None:  # the last stage
            log_probs, _ = response_log_probs(
                logits, responses.to(device), temperature=sampling_temperature(batch),
                with_entropy=False,
            )  # fmt: skip
            log_probs = log_probs.float()
        else:  # filled by the last stage's broadcast
            log_probs = torch.empty(responses.shape, dtype=torch.float32, device=device)
        if shards.stages is not None:
            import torch.distributed as dist

            dist.broadcast(log_probs, src=shards.stages.ranks[-1], group=shards.stages.group)
    log_probs = (log_probs * response_mask.to(log_probs)).cpu()
    (mine,) = shards.own_rows([log_probs])
    return mine
