"""A rollout replica spanning ``tg`` ranks with tensor parallelism (``placement.pools.rollout.tp``).

The rollout pool's ranks form replicas of ``tg`` consecutive ranks (replica
``rank // tg``, tensor rank ``rank % tg``). Each rank holds only its
megatron-format tensor-parallel slice of every weight
(:mod:`hfsdk_backend_common.hybrid.llama_format`: grouped QKV and fused
gate/up column parallel, proj and fc2 row parallel, embedding and output
layer vocabulary parallel over the vocabulary padded to a multiple of ``tg``,
norms replicated). To the rollout backend the rank is an
:class:`hfsdk.ActorSource` whose :meth:`TPReplicaSource.generation_shards`
returns :class:`ReplicaShards`, so the ``hf`` rollout takes its shard path
and decodes with ``TPDecoder`` over the replica's tensor group; the replica's
ranks pool their prompts and each keeps its own rows
(:class:`~hfsdk_backend_common.hybrid.row_pool.RowPool`).

**Weight sync.** The actor's rank 0 still broadcasts every weight as a full
HF-named tensor (:mod:`hfsdk_backend_common.weight_sync`): the wire carries
full tensors to every replica rank. :func:`receive_slices` converts each
megatron weight as soon as its HF sources arrived and keeps only this rank's
slice (a layer's q/k/v or gate/up are held whole until the last of them
arrives). Sending each rank only its slices is future work.

**Behaviour log-probs** (:func:`tp_log_probs`): one ``TPDecoder`` forward
over prompt + response on the slices (vocabulary-parallel logits gathered),
the replica's rows pooled like the prompts.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import torch

from hfsdk import DataParallelInfo, GenerationShards, HfsdkError
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
from hfsdk_backend_common.hybrid.row_pool import RowPool
from hfsdk_backend_common.hybrid.support import tp_support_problems
from hfsdk_backend_common.token_ops import position_ids_from_mask, response_log_probs
from hfsdk_backend_common.tokenizers import load_tokenizer

_VOCAB_PARALLEL = ("embedding.word_embeddings.weight", "output_layer.weight")


def pool_key(tg: int) -> str:
    """How the config spells the setting (error messages)."""
    return f"placement.pools.rollout.tp={tg}"


def rank_layout(rank: int, world: int, tg: int) -> tuple[int, int]:
    """``(replica, tp_rank)`` of rollout rank ``rank``: replicas are ``tg`` consecutive ranks."""
    if tg < 1 or world % tg:
        raise HfsdkError(
            f"{pool_key(tg)} does not divide the rollout pool's {world} ranks; choose a divisor"
        )
    return rank // tg, rank % tg


def replica_groups(rank: int, world: int, tg: int) -> tuple[Any, tuple[int, ...]]:
    """This rank's replica tensor group and its global ranks (collective: every rank calls it).

    ``new_group`` is collective over the rollout group's world, so every rank
    creates every replica's group in the same order and keeps its own.
    """
    import torch.distributed as dist

    replica, _ = rank_layout(rank, world, tg)
    mine: Any = None
    for r in range(world // tg):
        members = list(range(r * tg, (r + 1) * tg))
        group = dist.new_group(members)
        if r == replica:
            mine = group
    return mine, tuple(range(replica * tg, (replica + 1) * tg))


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
    state: Mapping[str, torch.Tensor], shape: LlamaShape, tg: int, tp_rank: int
) -> dict[str, torch.Tensor]:
    """This rank's slices of every weight of an HF Llama state dict (full tensors in)."""
    full = hf_llama_to_megatron(state, shape)
    return {s.name: slice_weight(full[s.name], s, tg, tp_rank) for s in llama_specs(shape)}


class SliceReceiver:
    """Turns a stream of full HF-named tensors into this rank's megatron slices, in place.

    :meth:`accept` is :func:`~hfsdk_backend_common.weight_sync.receive_stream`'s
    callback: an HF tensor is copied into a temporary until every source of its
    megatron weight has arrived, then that weight is built, sliced and written
    into ``slices`` (the temporaries dropped).
    """

    def __init__(
        self,
        slices: Mapping[str, torch.Tensor],
        shape: LlamaShape,
        *,
        tg: int,
        tp_rank: int,
        tied: bool,
    ) -> None:
        self.slices, self.shape, self.tg, self.tp_rank = slices, shape, tg, tp_rank
        self.specs = {s.name: s for s in llama_specs(shape)}
        self.sources = hf_sources(shape, tied=tied)
        self.users: dict[str, list[str]] = {}
        for name, needed in self.sources.items():
            for hf in needed:
                self.users.setdefault(hf, []).append(name)
        self.pending: dict[str, torch.Tensor] = {}
        self.filled: set[str] = set()

    def accept(self, name: str, tensor: torch.Tensor) -> None:
        """One full HF tensor from the wire (a view valid only during the call)."""
        if name not in self.users:
            raise HfsdkError(
                f"weight sync: the actor sent {name!r}, which the tensor-parallel rollout "
                "replica has no slice for; the rollout must build the actor's architecture"
            )
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
                self.slices[target].copy_(piece)
                self.filled.add(target)
        # Drop the sources no unfilled megatron weight still waits for.
        for hf in list(self.pending):
            if all(t in self.filled for t in self.users[hf]):
                del self.pending[hf]

    def missing(self) -> list[str]:
        """Megatron weights the stream left unset."""
        return sorted(set(self.slices) - self.filled)


class ReplicaShards(GenerationShards):
    """A tensor-parallel replica rank's slices as the rollout contract's generation shards.

    The slices are the replica's own (the weight sync writes them in place):
    :meth:`weights` hands them out as they are and :meth:`release` keeps them.
    """

    pg = 1
    stages = None

    def __init__(
        self,
        slices: dict[str, torch.Tensor],
        shape: DecoderShape,
        *,
        tg: int,
        tp_rank: int,
        tp_group: Any,
        tp_ranks: tuple[int, ...],
    ) -> None:
        self.slices, self.shape = slices, shape
        self.tg, self.tp_rank, self.tp_group, self.tp_ranks = tg, tp_rank, tp_group, tp_ranks
        self.rows = RowPool(tg=tg, tp_rank=tp_rank, tp_group=tp_group)

    def prompt_rows(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        pad_id: int,
        per_row: Sequence[torch.Tensor] = (),
    ) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
        """The prompts of every rank of this replica, left-padded to one width."""
        return self.rows.prompt_rows(input_ids, attention_mask, pad_id, per_row)

    def own_rows(self, columns: list[torch.Tensor]) -> list[torch.Tensor]:
        """This rank's rows of what the replica decoded."""
        return self.rows.own_rows(columns)

    def weights(self) -> Mapping[str, torch.Tensor]:
        """The replica rank's slices (no transition: they are held between calls)."""
        return self.slices

    def release(self) -> None:
        """Nothing to drop: the slices are the replica's weights."""

    def metrics(self) -> dict[str, float]:
        """No resharding happens on a replica."""
        return {}

    def decoder(self) -> TPDecoder:
        """A ``TPDecoder`` over the slices and the replica's tensor group."""
        return TPDecoder(
            self.slices, self.shape, tg=self.tg, tp_rank=self.tp_rank, tp_group=self.tp_group,
            tp_ranks=self.tp_ranks,
        )  # fmt: skip


class TPReplicaSource:
    """One rank of a tensor-parallel rollout replica as an :class:`hfsdk.ActorSource`.

    Loads the actor's model once to cut its slices, then drops it. Only
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
    ) -> None:
        from transformers import AutoModelForCausalLM

        self.model_path = model_path
        self.tokenizer = load_tokenizer(tokenizer_path)
        self.device, self.compute_dtype, self.dp, self.tg = device, dtype, dp, tg
        module = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype)
        self.hf_config = module.config
        problems = tp_support_problems(
            self.hf_config.to_dict(), tg, where=pool_key(tg),
            fix="set placement.pools.rollout.tp: 1",
        )  # fmt: skip
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
        _, tp_rank = rank_layout(rank, world, tg)
        slices = {
            name: t.to(device) for name, t in megatron_slices(
                state, self.llama_shape, tg, tp_rank
            ).items()
        }  # fmt: skip
        del module, state
        tp_group, tp_ranks = replica_groups(rank, world, tg)
        self.shards = ReplicaShards(
            slices, DecoderShape.from_hf_config(self.hf_config), tg=tg, tp_rank=tp_rank,
            tp_group=tp_group, tp_ranks=tp_ranks,
        )  # fmt: skip
        self.shards_taken = False
        self.weights_version = 0
        self.last_weights_metrics: dict[str, float] = {}

    def _refuse(self, what: str) -> HfsdkError:
        return HfsdkError(
            f"{pool_key(self.tg)}: the rollout asked for {what}, but a tensor-parallel replica "
            "holds only its slices; use rollout.backend: hf with the hfsdk decoder, or tp: 1"
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

    def receiver(self) -> SliceReceiver:
        """A receiver writing a weight-sync stream into this rank's slices."""
        return SliceReceiver(
            self.shards.slices, self.llama_shape, tg=self.tg, tp_rank=self.shards.tp_rank,
            tied=self.tied,
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
    prompt + response (the logits gathered over the vocabulary) and each keeps
    its own rows; 0 where the response is masked.
    """
    ids, mask, (responses, response_mask) = shards.prompt_rows(
        batch["input_ids"], batch["attention_mask"], pad_id,
        [batch["responses"], batch["response_mask"]],
    )  # fmt: skip
    decoder = shards.decoder()
    device = shards.slices["output_layer.weight"].device
    ids, mask = ids.to(device), mask.to(device)
    with torch.no_grad():
        t = ids.shape[1]
        keys = mask.bool()
        causal = torch.ones(t, t, dtype=torch.bool, device=device).tril()
        attend = causal[None, None] & keys[:, None, None, :]
        # A padded query row would attend nothing; let it see itself (its output is unused).
        attend = attend | torch.eye(t, dtype=torch.bool, device=device)[None, None]
        logits = decoder.forward(ids, position_ids_from_mask(mask), attend, KVCache(capacity=t))
        log_probs, _ = response_log_probs(
            logits, responses.to(device), temperature=sampling_temperature(batch),
            with_entropy=False,
        )  # fmt: skip
    log_probs = (log_probs * response_mask.to(log_probs)).cpu()
    (mine,) = shards.own_rows([log_probs])
    return mine
