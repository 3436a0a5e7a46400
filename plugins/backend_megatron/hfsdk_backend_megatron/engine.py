"""One role's megatron-core GPT shard in this process: forward passes, updates, state.

The engine holds this rank's (tp, pp) shard of an HF Llama / Qwen2 model
converted by :mod:`.convert`, an AdamW optimizer over its local parameters
(torch's: megatron-core's distributed optimizer needs CUDA buffers), and
runs micro-batches through :func:`.pipeline.run_pipeline`. Every rank of a
data-parallel replica receives the same batch (``MESH_PROTO``); results are
meaningful on the last pipeline stage (tp rank 0 is the one collected).

Losses, aggregation modes and global token counts are the ``fsdp``
backend's: the same :class:`~hfsdk_backend_common.objectives.ActorObjective`
and registry loss functions, counts all-reduced over the data-parallel group.
"""

from __future__ import annotations

import contextlib
import logging
import math
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from hfsdk import (
    REF_TOP_K,
    Batch,
    DataParallelInfo,
    HfsdkError,
    LossAggregation,
    LossCounts,
    atomic_path,
    group_split,
    load_checkpoint_file,
    load_tokenizer,
    masked_fill_zero,
    masked_mean,
    position_ids_from_mask,
    row_group,
)
from hfsdk_backend_common.cpu_allocator import keep_freed_cpu_memory
from hfsdk_backend_common.engine_support import (
    SEQUENCE_KEYS,
    UPDATE_KEYS,
    MetricAccumulator,
    check_minibatch_groups,
    finite_scores,
    require_keys,
    resolve_device,
    sampling_temperature,
    without_padding_weight,
)
from hfsdk_backend_common.lr_schedule import apply_optim_config, build_optimizer
from hfsdk_backend_common.objectives import ActorObjective, CriticObjective, actor_micro_loss
from hfsdk_backend_common.sync_check import RolloutSyncCheck
from hfsdk_backend_common.token_ops import last_token_index, response_slice
from hfsdk_backend_megatron import convert
from hfsdk_backend_megatron.arch import layout_problems, read_shape
from hfsdk_backend_megatron.megatron_config import MegatronRoleConfig
from hfsdk_backend_megatron.model_builder import build_gpt, init_parallel_state, load_shard
from hfsdk_backend_megatron.pipeline import run_pipeline
from hfsdk_backend_megatron.validation import lora_problem
from hfsdk_backend_megatron.vocab_parallel import vocab_parallel_log_probs
from hfsdk_backend_megatron.weights import load_hf_state

SHARD_FILE = "{role}_megatron_pp{pp}_tp{tp}.pt"
KIND_HEADS = {
    "actor": "lm",
    "reference": "lm",
    "critic": "value",
    "score": "score",
    "score_model": "score",  # a reward/cost model being trained: the scorer's head
}
CRITIC_UPDATE_KEYS = (*SEQUENCE_KEYS, "values", "returns")

log = logging.getLogger(__name__)


def _resolve_model_dir(config: MegatronRoleConfig) -> Path:
    if config.model_path is None:
        from hfsdk import default_model_dir

        return default_model_dir()
    return Path(config.model_path).expanduser()


class MegatronEngine:
    """A role (``kind``: actor, reference, critic, score) on megatron-core at (tp, pp, dp).

    torch.distributed must be initialised over the role's ranks (one process
    alone gets a one-rank group). ``total_steps`` fills a cosine schedule's
    length when the config leaves it 0.
    """

    def __init__(
        self,
        config: MegatronRoleConfig,
        *,
        role: str,
        kind: str,
        total_steps: int | None = None,
    ) -> None:
        if kind not in KIND_HEADS:
            raise HfsdkError(f"engine kind {kind!r} is unknown; expected one of {list(KIND_HEADS)}")
        self.config, self.role, self.kind = config, role, kind
        self.head: convert.Head = KIND_HEADS[kind]  # type: ignore[assignment]
        self.trainable = kind in ("actor", "critic", "score_model")
        self.model_dir = _resolve_model_dir(config)
        self._hf_config: Any = None
        self.shape = read_shape(self.model_dir, role)
        self.tokenizer = load_tokenizer(config.tokenizer_path or self.model_dir)
        self.device = resolve_device(config.device)
        if self.device.type == "cpu":
            keep_freed_cpu_memory()
        tp, pp = config.parallel.tp, config.parallel.pp
        if dist.is_initialized():
            problems = layout_problems(self.shape, tp, pp, dist.get_world_size(), role)
            if problems:
                raise HfsdkError("; ".join(problems))
        if config.parallel.sequence_parallel:
            # Needs the sequence-sharded activations in the pipeline/head code and the
            # norm-gradient all-reduce over tp; neither is written yet (and CPU cannot test it).
            raise HfsdkError(
                f"{role}.parallel.sequence_parallel is not supported by the megatron backend "
                "yet; set it to false"
            )
        if config.lora.enabled:
            raise HfsdkError(lora_problem(role, config.lora.rank))
        self.tp, self.pp, self.dp_size = init_parallel_state(tp, pp)
        from megatron.core import parallel_state as mpu

        self.mpu = mpu
        self.tp_rank = mpu.get_tensor_model_parallel_rank()
        self.pp_rank = mpu.get_pipeline_model_parallel_rank()
        self.dp_rank = mpu.get_data_parallel_rank()
        self.first_stage = mpu.is_pipeline_first_stage()
        self.last_stage = mpu.is_pipeline_last_stage()
        self.dp = DataParallelInfo(
            size=self.dp_size,
            rank=self.dp_rank,
            group=mpu.get_data_parallel_group() if dist.is_initialized() else None,
            collects=self.tp_rank == 0 and self.last_stage,
        )
        """The rollout contract's view: the collecting ranks are tp 0 of the last stage."""
        self.dtype = torch.float32 if self.trainable else _dtype(config.dtype)
        hf_state = load_hf_state(self.model_dir)
        # The same seed on every rank: a fresh value/score head is identical across replicas.
        torch.manual_seed(config.seed)
        self.model = build_gpt(
            self.shape,
            head=self.head,
            dtype=self.dtype,
            device=self.device,
            sequence_parallel=config.parallel.sequence_parallel,
            score_bias=self.head == "value",
            recompute=self.trainable and config.gradient_checkpointing,
            pad_token_id=self._embedding_pad_id(),
        )
        shard = convert.to_megatron(
            hf_state,
            self.shape,
            tp=tp,
            tp_rank=self.tp_rank,
            pp=pp,
            pp_rank=self.pp_rank,
            head=self.head,
        )
        if self.head != "lm" and self.last_stage:
            self._start_missing_head(shard)
        load_shard(self.model, shard)
        del hf_state, shard
        self._install_positions()
        if not self.trainable:
            self.model.requires_grad_(False)
        self.model.eval()
        self.vocab_per_rank = self.shape.padded_vocab(tp) // tp
        self.update_calls = 0
        self.optimizer: torch.optim.Optimizer | None = None
        self.scheduler: Any = None
        if self.trainable:
            self.optimizer, self.scheduler = build_optimizer(
                self.model.parameters(), config.optim, total_steps
            )
        self.weights_version = 0
        self.last_weights_metrics: dict[str, float] = {}
        self.weight_probes: dict[str, Any] = {}  # sends only what it holds
        self._generation_shards: Any = None

    def _start_missing_head(self, shard: dict[str, torch.Tensor]) -> None:
        """Add to ``shard`` the value/score head parameters the directory lacks, freshly built.

        Each parameter separately, as the fsdp backend loads them: a causal-LM directory
        has no head at all, and a critic started from a reward model (``score.weight``
        only) has no value bias, which then starts at 0.
        """
        fresh = {
            name: param.detach()
            for name, param in self.model.named_parameters()
            if name.startswith("output_layer.") and name not in shard
        }
        if fresh and self.tp_rank == 0:  # the head is replicated: one line per stage
            hf_names = ", ".join(sorted(n.replace("output_layer.", "score.") for n in fresh))
            if self.trainable:
                log.info(
                    "%s head from %s starts untrained (%s)", self.head, self.model_dir, hf_names
                )
            else:
                # A frozen scorer never trains its head: every score it gives is noise.
                log.warning(
                    "%s.model.model_path=%s has no trained score head (%s starts at random, "
                    "a causal LM?): its scores are random; point it at a trained reward model "
                    "(a reward_model run's checkpoints/step_N/reward_model_hf)",
                    self.role,
                    self.model_dir,
                    hf_names,
                )
        shard.update(fresh)

    def _embedding_pad_id(self) -> int | None:
        """The ``padding_idx`` transformers gives this model's input embedding.

        The config's ``pad_token_id``; a value or score model without one takes the
        tokenizer's, as the fsdp backend (and :meth:`_build_hf`) sets it.
        """
        pad_id = getattr(self.hf_config, "pad_token_id", None)
        if pad_id is None and self.head != "lm":
            pad_id = self.tokenizer.pad_token_id
        return pad_id

    # -- layout ---------------------------------------------------------------------------

    def _install_positions(self) -> None:
        """Rotary embeddings at per-sample positions (left padding gets position 0, as in HF).

        megatron-core's rotary module counts positions 0..s-1 for every sample;
        ours returns ``[s, b, 1, d]`` angles from the batch's ``position_ids``.
        """
        rope = self.model.rotary_pos_emb
        rope._hfsdk_positions = None
        original = rope.forward

        def forward(max_seq_len: int, *args: Any, **kwargs: Any) -> torch.Tensor:
            positions = rope._hfsdk_positions
            if positions is None:
                return original(max_seq_len, *args, **kwargs)
            angles = positions.t().unsqueeze(-1).float() * rope.inv_freq.float().to(
                positions.device
            )
            return torch.cat([angles, angles], dim=-1).unsqueeze(2)

        rope.forward = forward

    def named_tp_shards(self) -> dict[str, dict[str, Any]]:
        """This rank's parameters with their layout, for weight transfer (hybrid engine, vLLM).

        ``{name: {"tensor": param, "tp_dim": dim or None, "fused": kind or None}}``:
        ``tp_dim`` is the dimension split across the tensor-parallel group
        (``None``: replicated); ``fused`` is ``"qkv"`` (per key/value group: the
        group's query heads, its key, its value), ``"gate_up"`` (``[gate; up]``
        of this rank's slice) or ``None``. Names are megatron-core's with local
        layer numbers; global layer = ``pp_rank · layers/pp + local``. The
        vocabulary dimension is padded to a multiple of tp.
        """
        shards = {}
        for name, param in self.model.named_parameters():
            fused = "qkv" if "linear_qkv" in name else "gate_up" if "linear_fc1" in name else None
            shards[name] = {
                "tensor": param,
                "tp_dim": convert.tp_split_dim(name, self.head),
                "fused": fused,
            }
        return shards

    def layout(self) -> dict[str, int]:
        """This rank's position: tp, pp, dp sizes and ranks."""
        return {
            "tp": self.tp,
            "pp": self.pp,
            "dp": self.dp_size,
            "tp_rank": self.tp_rank,
            "pp_rank": self.pp_rank,
            "dp_rank": self.dp_rank,
        }

    # -- forward ------------------------------------------------------------------------

    def _stage_forward(self, micro: Batch, received: torch.Tensor | None) -> torch.Tensor:
        input_ids = micro["input_ids"].to(self.device)
        attention_mask = micro["attention_mask"].to(self.device)
        if "position_ids" in micro:
            position_ids = micro["position_ids"].to(self.device)
        else:
            position_ids = position_ids_from_mask(attention_mask)
        keep = attention_mask.bool()
        width = keep.shape[1]
        causal = torch.ones(width, width, dtype=torch.bool, device=self.device).tril()
        visible = causal[None] & keep[:, None, :]
        visible |= torch.eye(width, dtype=torch.bool, device=self.device)[None]
        if not self.first_stage:
            self.model.set_input_tensor(received)
        self.model.rotary_pos_emb._hfsdk_positions = position_ids
        try:
            return self.model(input_ids, position_ids, (~visible)[:, None])
        finally:
            self.model.rotary_pos_emb._hfsdk_positions = None

    def _hidden_shape(self, micro: Batch) -> tuple[int, int, int]:
        return (micro["input_ids"].shape[1], len(micro), self.shape.hidden_size)

    def _pipeline(self, micros: list[Batch], last_stage: Any, backward: bool) -> None:
        run_pipeline(
            micros,
            self._stage_forward,
            last_stage,
            hidden_shape=self._hidden_shape,
            dtype=self.dtype,
            device=self.device,
            backward=backward,
        )

    def _forward_micros(self, batch: Batch) -> list[Batch]:
        size = self.config.forward_micro_batch_size or self.config.micro_batch_size
        return batch.split(size) if len(batch) else []

    def _response_log_probs(
        self, logits: torch.Tensor, micro: Batch, temperature: float, with_entropy: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        responses = micro["responses"].to(self.device)
        sliced = response_slice(logits, responses.shape[1]).float()
        if temperature != 1.0:
            sliced = sliced / temperature
        return vocab_parallel_log_probs(
            sliced,
            responses,
            vocab_start=self.tp_rank * self.vocab_per_rank,
            vocab_size=self.shape.vocab_size,
            tp=self.tp,
            with_entropy=with_entropy,
        )

    def _log_probs(self, batch: Batch, operation: str, with_entropy: bool) -> list[torch.Tensor]:
        require_keys(batch, SEQUENCE_KEYS, operation)
        temperature = sampling_temperature(batch)
        width = batch["responses"].shape[1]
        log_probs: list[torch.Tensor] = []
        entropies: list[torch.Tensor] = []

        def last(micro: Batch, logits: torch.Tensor) -> None:
            lp, ent = self._response_log_probs(logits, micro, temperature, with_entropy)
            mask = micro["response_mask"].to(self.device)
            log_probs.append(masked_fill_zero(lp, mask).cpu())
            if ent is not None:
                entropies.append(masked_fill_zero(ent, mask).cpu())

        self.model.eval()
        with torch.no_grad():
            self._pipeline(self._forward_micros(batch), last, backward=False)
        if not self.last_stage:  # not collected: placeholders of the right shape
            zeros = torch.zeros(len(batch), width)
            return [zeros, zeros]
        empty = torch.zeros(0, width)
        out = [torch.cat(log_probs) if log_probs else empty]
        if with_entropy:
            out.append(torch.cat(entropies) if entropies else empty)
        return out

    def compute_log_prob(self, batch: Batch) -> Batch:
        """``old_log_probs`` and ``entropys`` (B, R), 0 where masked."""
        log_probs, entropy = self._log_probs(batch, "compute_log_prob", True)
        return Batch.from_dict(tensors={"old_log_probs": log_probs, "entropys": entropy})

    def compute_ref_log_prob(self, batch: Batch) -> Batch:
        """``ref_log_probs`` (B, R) under this (frozen) model."""
        if batch.meta.get(REF_TOP_K):
            raise HfsdkError(
                f"{self.role}: the megatron backend does not compute a teacher's top-k "
                f"log-probs (asked for k={batch.meta[REF_TOP_K]}); run the teacher on fsdp "
                f"({self.role}.backend: fsdp) or set algorithm.top_k: 0"
            )
        (log_probs, *_) = self._log_probs(batch, "compute_ref_log_prob", False)
        return Batch.from_dict(tensors={"ref_log_probs": log_probs})

    def logits(self, batch: Batch) -> torch.Tensor | None:
        """Full-vocabulary logits ``(B, S, V)`` on the last stage (gathered over tp; tests only)."""
        parts: list[torch.Tensor] = []

        def last(micro: Batch, logits: torch.Tensor) -> None:
            if self.head == "lm" and self.tp > 1:
                gathered = [torch.empty_like(logits) for _ in range(self.tp)]
                dist.all_gather(
                    gathered, logits.contiguous(), group=self.mpu.get_tensor_model_parallel_group()
                )
                logits = torch.cat(gathered, dim=-1)
            parts.append(logits[..., : self.shape.vocab_size].float().cpu())

        self.model.eval()
        with torch.no_grad():
            self._pipeline(self._forward_micros(batch), last, backward=False)
        return torch.cat(parts) if self.last_stage else None

    def _values(self, out: torch.Tensor, micro: Batch) -> torch.Tensor:
        per_token = out[..., 0].float()
        values = response_slice(per_token, micro["responses"].shape[1])
        return masked_fill_zero(values, micro["response_mask"].to(self.device))

    def compute_values(self, batch: Batch) -> Batch:
        """``values`` (B, R) of the critic, 0 where masked."""
        require_keys(batch, SEQUENCE_KEYS, "compute_values")
        parts: list[torch.Tensor] = []
        self.model.eval()
        with torch.no_grad():
            self._pipeline(
                self._forward_micros(batch),
                lambda micro, out: parts.append(self._values(out, micro).cpu()),
                backward=False,
            )
        width = batch["responses"].shape[1]
        if not self.last_stage or not parts:
            return Batch.from_dict(tensors={"values": torch.zeros(len(batch), width)})
        return Batch.from_dict(tensors={"values": torch.cat(parts)})

    def _last_token_scores(self, out: torch.Tensor, micro: Batch) -> torch.Tensor:
        """(B,) the score head's output at each row's last response token."""
        prompt_length = micro["input_ids"].shape[1] - micro["responses"].shape[1]
        index = last_token_index(micro["response_mask"], prompt_length).to(self.device)
        return out[..., 0].float().gather(1, index[:, None])[:, 0]

    def compute_scores(self, batch: Batch, output_key: str = "rm_scores") -> Batch:
        """``output_key`` (B,): each response's score at its last token."""
        require_keys(batch, SEQUENCE_KEYS, "compute_scores")
        parts: list[torch.Tensor] = []

        def last(micro: Batch, out: torch.Tensor) -> None:
            parts.append(self._last_token_scores(out, micro).cpu())

        self.model.eval()
        with torch.no_grad():
            self._pipeline(self._forward_micros(batch), last, backward=False)
        if not self.last_stage or not parts:
            return Batch.from_dict(tensors={output_key: torch.zeros(len(batch))})
        return Batch.from_dict(tensors={output_key: finite_scores(torch.cat(parts))})

    # -- training -----------------------------------------------------------------------

    def _global_counts(self, response_mask: torch.Tensor) -> LossCounts:
        mask = response_mask != 0
        counts = torch.tensor(
            [float(mask.sum()), float(mask.any(dim=-1).sum())],
            dtype=torch.float64,
            device=self.device,
        )
        if self.dp_size > 1:
            dist.all_reduce(counts, group=self.mpu.get_data_parallel_group())
        return LossCounts(tokens=float(counts[0]), sequences=float(counts[1]))

    def _minibatches(self, batch: Batch, epoch: int) -> Iterator[Batch]:
        size = self.config.mini_batch_size
        if size % self.dp_size:
            raise HfsdkError(
                f"{self.role}.mini_batch_size={size} is not divisible by the {self.dp_size} "
                "data-parallel replicas; make it a multiple of dp = devices / (tp·pp)"
            )
        group = row_group(batch)
        # iter_minibatches would round a part group up: fewer optimizer steps than configured.
        check_minibatch_groups(self.role, size, self.dp_size, group)
        local = min(size // self.dp_size, len(batch))
        seed = self.config.seed + 100_003 * self.update_calls + epoch
        return batch.iter_minibatches(local, shuffle=self.config.shuffle, seed=seed, group=group)

    def _reduce_gradients(self) -> None:
        """Average over data-parallel replicas; sum a tied embedding's two copies (pp > 1)."""
        params = [p for p in self.model.parameters() if p.requires_grad]
        for param in params:
            if param.grad is None:
                param.grad = torch.zeros_like(param)
        if self.dp_size > 1:
            group = self.mpu.get_data_parallel_group()
            for param in params:
                dist.all_reduce(param.grad, op=dist.ReduceOp.AVG, group=group)
        if self.pp > 1 and self.head == "lm" and self.shape.tie_embeddings:
            shared = None
            if self.first_stage:
                shared = self.model.embedding.word_embeddings.weight
            elif self.last_stage:
                shared = self.model.output_layer.weight
            if shared is not None:
                dist.all_reduce(shared.grad, group=self.mpu.get_embedding_group())

    def _grad_norm(self) -> float:
        """The global gradient norm: split parameters on every tp rank, replicated ones once."""
        total = torch.zeros((), dtype=torch.float64, device=self.device)
        tied_copy = self.pp > 1 and self.head == "lm" and self.shape.tie_embeddings
        for name, param in self.model.named_parameters():
            if param.grad is None:
                continue
            if (
                tied_copy
                and self.last_stage
                and not self.first_stage
                and name == "output_layer.weight"
            ):
                continue
            split = convert.tp_split_dim(name, self.head) is not None
            if split or self.tp_rank == 0:
                total += param.grad.double().pow(2).sum()
        if self.tp * self.pp > 1:
            dist.all_reduce(total, group=self.mpu.get_model_parallel_group())
        return float(total.sqrt())

    def _optimizer_step(self, metrics: MetricAccumulator, prefix: str) -> None:
        assert self.optimizer is not None
        self._reduce_gradients()
        grad_norm = self._grad_norm()
        metrics.add_mean(f"{prefix}/grad_norm", grad_norm)
        if math.isfinite(grad_norm):
            clip = self.config.optim.grad_clip
            coef = clip / (grad_norm + 1e-6)
            if coef < 1.0:
                for param in self.model.parameters():
                    if param.grad is not None:
                        param.grad.mul_(coef)
            self.optimizer.step()
            metrics.add_mean(f"{prefix}/skipped_steps", 0.0)
        else:
            metrics.add_mean(f"{prefix}/skipped_steps", 1.0)
        self.optimizer.zero_grad(set_to_none=True)

    def _finish_update(self, metrics: MetricAccumulator, prefix: str) -> dict[str, float]:
        metrics.add_mean(f"{prefix}/lr", float(self.scheduler.get_last_lr()[0]))
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler.step")
            self.scheduler.step()
        self.update_calls += 1
        if not self.last_stage:
            return {}
        # Weighted means and maxima over the data-parallel ranks (all last-stage, like this
        # one): the core only averages ranks' results.
        if dist.is_initialized():
            metrics.gather(self.mpu.get_data_parallel_group())
        return metrics.result()

    def update_actor(self, batch: Batch, objective: ActorObjective) -> dict[str, float]:
        """Train the policy on ``batch`` exactly as the fsdp actor does (same loss terms)."""
        self._require_trainable("actor", "update_actor")
        if objective.token_terms:
            names = ", ".join(term.name for term in objective.token_terms)
            raise HfsdkError(
                f"{self.role}: the megatron backend does not train token loss terms ({names}: "
                f"they need the policy's log-probs at given token ids); train the actor on "
                f"fsdp ({self.role}.backend: fsdp) or turn the term off (algorithm.top_k: 0)"
            )
        keys = list(UPDATE_KEYS) + (["ref_log_probs"] if objective.kl_loss_coef > 0 else [])
        require_keys(batch, keys, "update_actor")
        sync = RolloutSyncCheck.for_update(batch)
        computed_old = "old_log_probs" not in batch and not self.is_on_policy(len(batch))
        if computed_old:
            # Several optimizer steps: the sampler is the policy before the first of them.
            batch = batch.union(self.compute_log_prob(batch).select(["old_log_probs"]))
        batch = without_padding_weight(batch)  # dispatch padding rows get no weight
        if sync is not None and computed_old and self.last_stage:
            sync.observe(batch, batch["old_log_probs"])
        # Otherwise the training forward before the first optimizer step is the sampler's
        # (no rollout/log_prob_diff_* is lost when the old log-probs are skipped).
        first_forward = [sync if sync is not None and not computed_old else None]
        has_reference = "ref_log_probs" in batch
        temperature = sampling_temperature(batch)
        metrics = MetricAccumulator(self.dp_size)
        self.model.train()
        for epoch in range(self.config.ppo_epochs):
            for mini in self._minibatches(batch, epoch):
                counts = self._global_counts(mini["response_mask"])
                norm_length = objective.norm_length or float(mini["responses"].shape[1])
                agg = LossAggregation.from_counts(
                    objective.loss_agg_mode, counts, norm_length=norm_length, dp_size=self.dp_size
                )
                self.optimizer.zero_grad(set_to_none=True)

                def last(
                    micro: Batch,
                    logits: torch.Tensor,
                    agg: LossAggregation = agg,
                    counts: Any = counts,
                ) -> torch.Tensor:
                    return self._actor_loss(
                        micro, logits, objective, agg, counts, temperature, has_reference, metrics,
                        first_forward[0],
                    )  # fmt: skip

                self._pipeline(group_split(mini, self.config.micro_batch_size), last, backward=True)
                self._optimizer_step(metrics, "actor")
                metrics.end_minibatch()
                first_forward[0] = None
        for name, value in (sync.metrics() if sync is not None else {}).items():
            metrics.add_mean(name, value)
        self.weights_version += 1
        return self._finish_update(metrics, "actor")

    def _actor_loss(
        self,
        micro: Batch,
        logits: torch.Tensor,
        objective: ActorObjective,
        agg: LossAggregation,
        counts: LossCounts,
        temperature: float,
        has_reference: bool,
        metrics: MetricAccumulator,
        sync: RolloutSyncCheck | None = None,
    ) -> torch.Tensor:
        log_prob, entropy = self._response_log_probs(logits, micro, temperature, True)
        assert entropy is not None
        if sync is not None:
            sync.observe(micro, log_prob)
        return actor_micro_loss(
            objective,
            micro,
            log_prob,
            entropy,
            aggregation=agg,
            counts=counts,
            has_reference=has_reference,
            metrics=metrics,
        )

    def is_on_policy(self, local_rows: int) -> bool:
        """Whether an update of ``local_rows`` rows per replica is one epoch of one mini-batch.

        Then the old log-probs may be skipped: the model is built without dropout
        (``model_builder``), so the training forward equals the sampler's.
        """
        return self.config.updates_in_one_pass(local_rows * self.dp_size)

    def update_critic(self, batch: Batch, objective: CriticObjective) -> dict[str, float]:
        """Fit the values to ``returns`` exactly as the fsdp critic does."""
        self._require_trainable("critic", "update_critic")
        require_keys(batch, CRITIC_UPDATE_KEYS, "update_critic")
        batch = without_padding_weight(batch)
        metrics = MetricAccumulator(self.dp_size)
        self.model.train()
        for epoch in range(self.config.ppo_epochs):
            for mini in self._minibatches(batch, epoch):
                counts = self._global_counts(mini["response_mask"])
                norm_length = objective.norm_length or float(mini["responses"].shape[1])
                agg = LossAggregation.from_counts(
                    objective.loss_agg_mode, counts, norm_length=norm_length, dp_size=self.dp_size
                )
                self.optimizer.zero_grad(set_to_none=True)

                def last(
                    micro: Batch,
                    out: torch.Tensor,
                    agg: LossAggregation = agg,
                    counts: Any = counts,
                ) -> torch.Tensor:
                    mask = micro["response_mask"].to(self.device)
                    vpreds = self._values(out, micro)
                    loss, loss_metrics = objective.value_loss(
                        values=vpreds,
                        old_values=micro["values"].to(self.device),
                        returns=micro["returns"].to(self.device),
                        response_mask=mask,
                        config=objective.value_loss_config,
                        aggregation=agg,
                    )
                    metrics.add_share("critic/vf_loss", float(loss.detach()))
                    tokens = float((mask != 0).sum())
                    vpred_mean = float(masked_mean(vpreds.detach(), mask)) if tokens else 0.0
                    metrics.add_token_share("critic/vpred_mean", vpred_mean, tokens, counts)
                    for name, value in loss_metrics.items():
                        metrics.add_token_share(f"critic/{name}", float(value), tokens, counts)
                    return loss

                self._pipeline(group_split(mini, self.config.micro_batch_size), last, backward=True)
                self._optimizer_step(metrics, "critic")
                metrics.end_minibatch()
        return self._finish_update(metrics, "critic")

    def update_score_model(self, batch: Batch, loss: Any) -> dict[str, Any]:
        """Minimise a scorer ``loss`` (``hfsdk.ScoreLoss``) exactly as the fsdp score model does.

        Each mini-batch's loss is the mean over its valid row groups (e.g. preference
        pairs) on all data-parallel replicas; a group with a dispatch padding row is left
        out. Metrics: ``score_model/loss``, the loss's own means, ``grad_norm``, ``lr``.
        """
        self._require_trainable("score_model", "update_score_model")
        require_keys(batch, SEQUENCE_KEYS, "update_score_model")
        group = row_group(batch)
        if len(batch) % group:
            raise HfsdkError(
                f"update_score_model got {len(batch)} rows on one replica, which is not a "
                f"whole number of groups of {group}; send the pairs' rows in whole groups"
            )
        batch = without_padding_weight(batch)
        metrics = MetricAccumulator(self.dp_size)
        self.model.train()
        for epoch in range(self.config.ppo_epochs):
            for mini in self._minibatches(batch, epoch):
                valid_rows = mini["response_mask"].sum(dim=-1) > 0
                total = self._global_groups(valid_rows.view(-1, group).all(dim=-1))
                share = self.dp_size / total if total else 0.0
                self.optimizer.zero_grad(set_to_none=True)

                def last(micro: Batch, out: torch.Tensor, share: float = share) -> torch.Tensor:
                    rows = micro["response_mask"].sum(dim=-1) > 0
                    valid = rows.view(-1, group).all(dim=-1).to(self.device).float()
                    per_group, stats = loss(self._last_token_scores(out, micro), micro)
                    value = (per_group * valid).sum() * share
                    metrics.add_share("score_model/loss", float(value.detach()))
                    for name, per in stats.items():
                        kept = float((per.detach().float() * valid).sum()) * share
                        metrics.add_share(f"score_model/{name}", kept)
                    return value

                self._pipeline(group_split(mini, self.config.micro_batch_size), last, backward=True)
                self._optimizer_step(metrics, "score_model")
                metrics.end_minibatch()
        return self._finish_update(metrics, "score_model")

    def _global_groups(self, valid: torch.Tensor) -> float:
        """Valid row groups of a mini-batch summed over the data-parallel replicas."""
        count = torch.tensor([float(valid.sum())], dtype=torch.float64, device=self.device)
        if self.dp_size > 1:
            dist.all_reduce(count, group=self.mpu.get_data_parallel_group())
        return float(count[0])

    def _require_trainable(self, kind: str, method: str) -> None:
        if self.kind != kind or self.optimizer is None:
            raise HfsdkError(f"{method} needs the {kind} role; this engine is {self.kind}")

    # -- weights and state ----------------------------------------------------------------

    def local_state(self) -> dict[str, torch.Tensor]:
        """This rank's parameters (CPU copies), megatron names."""
        return {k: v.detach().cpu().clone() for k, v in self.model.named_parameters()}

    def _gather_shards(self, local: dict[str, Any]) -> dict[tuple[int, int], Any]:
        """Every (pp, tp) rank's ``local`` object of this data-parallel replica."""
        mine = ((self.pp_rank, self.tp_rank), local)
        if self.tp * self.pp == 1:
            return dict([mine])
        everyone: list[Any] = [None] * (self.tp * self.pp)
        dist.all_gather_object(everyone, mine, group=self.mpu.get_model_parallel_group())
        return dict(everyone)

    def full_hf_state(self) -> dict[str, torch.Tensor]:
        """The full HF state dict, assembled on every rank (collective over tp × pp)."""
        shards = self._gather_shards(self.local_state())
        return convert.to_hf(shards, self.shape, tp=self.tp, pp=self.pp, head=self.head)

    def _hf_class(self) -> Any:
        from transformers import (
            AutoModelForCausalLM,
            AutoModelForSequenceClassification,
            AutoModelForTokenClassification,
        )

        return {
            "lm": AutoModelForCausalLM,
            "value": AutoModelForTokenClassification,
            "score": AutoModelForSequenceClassification,
        }[self.head]

    def _build_hf(self, state: dict[str, torch.Tensor]) -> Any:
        from transformers import AutoConfig, GenerationConfig

        config = AutoConfig.from_pretrained(str(self.model_dir))
        if self.head != "lm":
            config.num_labels = 1
            if getattr(config, "pad_token_id", None) is None:
                config.pad_token_id = self.tokenizer.pad_token_id
        model = self._hf_class().from_config(config, dtype=torch.float32)
        missing, unexpected = model.load_state_dict(state, strict=False)
        tied = {"lm_head.weight"} if getattr(config, "tie_word_embeddings", False) else set()
        if set(missing) - tied or unexpected:
            # A weight left at from_config's random init would be exported silently.
            raise HfsdkError(
                f"the megatron weights do not fill {type(model).__name__} (missing "
                f"{sorted(set(missing) - tied)[:4]}, unexpected {sorted(unexpected)[:4]}); the "
                "converter does not map this model's layout: train it with backend: fsdp"
            )
        if self.head == "lm":
            with contextlib.suppress(OSError):
                model.generation_config = GenerationConfig.from_pretrained(str(self.model_dir))
        return model.eval()

    # -- the rollout contract's actor side (hfsdk.ActorSource) ---------------------------

    @property
    def model_path(self) -> Path:
        """The HF model directory the actor started from."""
        return self.model_dir

    @property
    def compute_dtype(self) -> torch.dtype:
        """The dtype generation runs in: the engine's own."""
        return self.dtype

    @property
    def hf_config(self) -> Any:
        """The model directory's transformers config (read once)."""
        if self._hf_config is None:
            from transformers import AutoConfig

            self._hf_config = AutoConfig.from_pretrained(str(self.model_dir))
        return self._hf_config

    @property
    def generation_eos_ids(self) -> list[int]:
        """EOS ids of the model directory's generation config.

        Without a generation_config.json the config is derived from config.json,
        as transformers does for a loaded model (the fsdp actor's
        ``module.generation_config``), so both backends stop on the same ids.
        """
        from transformers import GenerationConfig

        try:
            generation = GenerationConfig.from_pretrained(str(self.model_dir))
        except OSError:
            generation = GenerationConfig.from_model_config(self.hf_config)
        configured = generation.eos_token_id
        if configured is None:
            return []
        return [configured] if isinstance(configured, int) else list(configured)

    @contextlib.contextmanager
    def live_hf_module(self, *, gather: bool = False) -> Iterator[None]:
        """Never: the actor holds megatron-core shards, not an HF module."""
        yield None

    def hf_weights(self) -> Iterator[tuple[str, torch.Tensor]]:
        """The actor's weights as (HF name, full CPU tensor), one piece at a time.

        Pieces: the embedding, each layer in order, the final norm and output
        layer; each is gathered from the (pp, tp) ranks that hold it (collective
        over the model-parallel group) and converted to HF names, so a rank
        holds at most one layer's full tensors beside its shard. Tied output
        layers are not yielded (HF names them once, as the embedding).
        """
        shape, pp = self.shape, self.pp
        per = shape.num_layers // pp
        local = {k: v.detach() for k, v in self.model.named_parameters()}
        stats = {"received": 0, "peak": 0}

        def gather(mine: dict[str, torch.Tensor], stage: int) -> list[dict[str, torch.Tensor]]:
            """The tp shards of ``stage``'s tensors ``mine`` (empty on other stages)."""
            own = {k: v.cpu() for k, v in mine.items()} if self.pp_rank == stage else {}
            parts = self._gather_shards(own)
            by_tp = [parts[(stage, t)] for t in range(self.tp)]
            piece = sum(t.numel() * t.element_size() for part in by_tp for t in part.values())
            held = sum(t.numel() * t.element_size() for t in own.values())
            stats["received"] += piece - held
            stats["peak"] = max(stats["peak"], piece)
            return by_tp

        def select(prefix: str) -> dict[str, torch.Tensor]:
            return {k: v for k, v in local.items() if k.startswith(prefix)}

        embedding = convert.embedding_to_hf(gather(select("embedding."), 0), shape)
        for name, tensor in embedding.items():
            yield name, tensor.to(self.dtype)
        for layer in range(shape.num_layers):
            stage, number = divmod(layer, per)
            parts = gather(select(f"decoder.layers.{number}."), stage)
            for name, tensor in convert.layer_to_hf(
                parts, shape, local=number, layer=layer
            ).items():
                yield name, tensor.to(self.dtype)
        ends = {**select("decoder.final_layernorm."), **select("output_layer.")}
        final = convert.final_to_hf(gather(ends, pp - 1), shape, head=self.head)
        for name, tensor in final.items():
            yield name, tensor.to(self.dtype)
        self.last_weights_metrics = {
            "perf/reshard_bytes": float(stats["received"]),
            "perf/reshard_peak_extra_bytes": float(stats["peak"]),
        }

    def generation_shards(self, config: Any) -> Any:
        """This rank's 3D-HybridEngine shards at ``actor.rollout_layout`` (None: unsupported model).

        Built once (creates the generation process groups: collective over the world).
        """
        from hfsdk_backend_megatron.hybrid_shards import HybridShards, hybrid_supported

        if hybrid_supported(self) is not None:
            return None
        if self._generation_shards is None:
            self._generation_shards = HybridShards(self)
        return self._generation_shards

    def export_hf(self, directory: str | Path) -> Path:
        """The model in HF format with its tokenizer (global rank 0 writes; collective)."""
        state = self.full_hf_state()
        directory = Path(directory)
        if dist.get_rank() == 0:
            model = self._build_hf(state)
            directory.mkdir(parents=True, exist_ok=True)
            model.save_pretrained(str(directory))
            self.tokenizer.save_pretrained(str(directory))
        dist.barrier()
        return directory

    def _optimizer_local(self) -> dict[str, Any]:
        if self.optimizer is None:
            return {}
        by_param = {id(p): n for n, p in self.model.named_parameters()}
        moments: dict[str, dict[str, torch.Tensor]] = {}
        step = 0.0
        for param, state in self.optimizer.state.items():
            name = by_param[id(param)]
            moments[name] = {k: state[k].detach().cpu().clone() for k in ("exp_avg", "exp_avg_sq")}
            step = float(state["step"])
        groups = [
            {k: v for k, v in g.items() if k != "params"} for g in self.optimizer.param_groups
        ]
        return {"moments": moments, "step": step, "groups": groups}

    def save_checkpoint(self, directory: str | Path) -> Path:
        """Each (pp, tp) rank of data-parallel replica 0 writes its own shard file (collective)."""
        directory = Path(directory)
        if self.dp_rank == 0:
            state = {
                "layout": {"tp": self.tp, "pp": self.pp},
                "head": self.head,
                "model": self.local_state(),
                "optimizer": self._optimizer_local(),
                "scheduler": self.scheduler.state_dict() if self.scheduler else None,
                "update_calls": self.update_calls,
            }
            directory.mkdir(parents=True, exist_ok=True)
            path = directory / SHARD_FILE.format(role=self.role, pp=self.pp_rank, tp=self.tp_rank)
            with atomic_path(path) as tmp:
                torch.save(state, tmp)
        dist.barrier()
        return directory

    def load_checkpoint(self, directory: str | Path) -> None:
        """Restore :meth:`save_checkpoint`'s files, written at this or any other (tp, pp, dp)."""
        directory = Path(directory)
        files = sorted(directory.glob(SHARD_FILE.format(role=self.role, pp="*", tp="*")))
        if not files:
            raise HfsdkError(f"no {self.role} megatron checkpoint in {str(directory)!r}")
        own = directory / SHARD_FILE.format(role=self.role, pp=self.pp_rank, tp=self.tp_rank)
        probe = load_checkpoint_file(files[0])
        saved_tp, saved_pp = probe["layout"]["tp"], probe["layout"]["pp"]
        if (saved_tp, saved_pp) == (self.tp, self.pp):
            state = load_checkpoint_file(own)
            model, moments = state["model"], state["optimizer"].get("moments", {})
        else:
            state, model, moments = self._reshard(directory, saved_tp, saved_pp)
        load_shard(self.model, model)
        if self.optimizer is not None:
            opt = state["optimizer"]
            for group, saved in zip(self.optimizer.param_groups, opt["groups"], strict=False):
                group.update(saved)
            # The saved groups' lr, betas, eps and weight decay must not outlive the config.
            apply_optim_config(self.optimizer, self.config.optim)
            # A fused (or capturable) AdamW steps with `step` on the parameter's device, the
            # others with it on the CPU: torch's own load_state_dict places it so.
            on_device = {
                id(p)
                for g in self.optimizer.param_groups
                if g.get("fused") or g.get("capturable")
                for p in g["params"]
            }
            for name, param in self.model.named_parameters():
                if name in moments:
                    step_device = param.device if id(param) in on_device else torch.device("cpu")
                    self.optimizer.state[param] = {
                        "step": torch.tensor(
                            float(opt["step"]), dtype=torch.float32, device=step_device
                        ),
                        **{k: v.to(self.device).clone() for k, v in moments[name].items()},
                    }
            self.scheduler.load_state_dict(state["scheduler"])
        self.update_calls = int(state["update_calls"])
        self.weights_version += 1

    def _reshard(self, directory: Path, tp: int, pp: int) -> tuple[dict, dict, dict]:
        """Merge a checkpoint saved at (tp, pp) to HF layout, then cut this rank's shard."""
        shards, moment_shards = {}, {"exp_avg": {}, "exp_avg_sq": {}}
        state: dict[str, Any] = {}
        for p in range(pp):
            for t in range(tp):
                path = directory / SHARD_FILE.format(role=self.role, pp=p, tp=t)
                state = load_checkpoint_file(path)
                shards[(p, t)] = state["model"]
                found = state["optimizer"].get("moments", {})
                for key in moment_shards:
                    moment_shards[key][(p, t)] = {n: m[key] for n, m in found.items()}

        def cut(parts: dict) -> dict[str, torch.Tensor]:
            full = convert.to_hf(parts, self.shape, tp=tp, pp=pp, head=self.head)
            return convert.to_megatron(
                full,
                self.shape,
                tp=self.tp,
                tp_rank=self.tp_rank,
                pp=self.pp,
                pp_rank=self.pp_rank,
                head=self.head,
            )

        model = cut(shards)
        moments: dict[str, dict[str, torch.Tensor]] = {}
        if self.optimizer is not None and moment_shards["exp_avg"][(0, 0)]:
            for key, parts in moment_shards.items():
                for name, value in cut(parts).items():
                    moments.setdefault(name, {})[key] = value
        return state, model, moments


def _dtype(name: str) -> torch.dtype:
    return {"float32": torch.float32, "bfloat16": torch.bfloat16}[name]
