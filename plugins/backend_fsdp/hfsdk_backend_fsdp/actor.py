"""The actor (trained causal LM) and the reference (frozen causal LM) engines."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar, Literal

import attrs
import torch
from torch.nn import functional

from hfsdk import (
    REF_TOP_K,
    Batch,
    HfsdkError,
    LossAggregation,
    LossCounts,
    masked_fill_zero,
    model_inputs_of,
)
from hfsdk_backend_common.engine_support import (
    SEQUENCE_KEYS,
    UPDATE_KEYS,
    MetricAccumulator,
    require_keys,
    sampling_temperature,
    without_padding_weight,
)
from hfsdk_backend_common.hybrid.shards import GenerationShards
from hfsdk_backend_common.loss_terms import entropy_from_logits
from hfsdk_backend_common.objectives import ActorObjective, actor_micro_loss
from hfsdk_backend_common.packing import pack_rows
from hfsdk_backend_common.sync_check import RolloutSyncCheck, model_has_dropout
from hfsdk_backend_common.token_ops import (
    gathered_log_probs,
    padding_columns,
    response_log_probs,
    response_slice,
    top_k_log_probs,
)
from hfsdk_backend_fsdp import sharding
from hfsdk_backend_fsdp.engine import FSDPEngine
from hfsdk_backend_fsdp.models import ModelKind

EntropyMode = Literal["none", "detached", "grad"]


@attrs.define
class ResponseExtras:
    """What a forward pass computes besides the sampled tokens' log-probs, on request.

    ``top_k``: the k most likely tokens per response position (a teacher's,
    for distillation); ``ids_keys``: batch columns of token ids (B, R, k) to
    gather the log-probs of, with gradient (a ``hfsdk.TokenIdsLossTerm``).
    Results are (B, R, k), 0 past the longest response.
    """

    top_k: int = 0
    ids_keys: tuple[str, ...] = ()
    top_k_log_probs: torch.Tensor | None = None
    top_k_ids: torch.Tensor | None = None
    ids_log_probs: dict[str, torch.Tensor] = attrs.field(factory=dict)

    @property
    def wanted(self) -> bool:
        """Whether anything is asked for."""
        return bool(self.top_k or self.ids_keys)

    def fill(
        self,
        scaled: torch.Tensor,
        ids: dict[str, torch.Tensor],
        to_batch: Callable[[torch.Tensor], torch.Tensor],
    ) -> None:
        """Compute from the response positions' scaled logits ``(..., V)``; ``to_batch``
        lays a ``(..., k)`` result out as (B, R, k)."""
        log_z = torch.logsumexp(scaled, dim=-1)
        if self.top_k:
            values, top_ids = top_k_log_probs(scaled, log_z, self.top_k)
            self.top_k_log_probs, self.top_k_ids = to_batch(values), to_batch(top_ids)
        for key, column in ids.items():
            self.ids_log_probs[key] = to_batch(gathered_log_probs(scaled, log_z, column))


def _suppress(logits: torch.Tensor, token_ids: list[int]) -> torch.Tensor:
    """``logits`` with ``token_ids`` out of the distribution, as a sampler that suppresses
    them has it. A large finite negative, not -inf: entropies stay finite (0·-inf is nan)."""
    if not token_ids:
        return logits
    ids = torch.tensor(token_ids, device=logits.device)
    return logits.index_fill(-1, ids, -1.0e4)


class _CausalLMEngine(FSDPEngine):
    """Shared log-prob computation of the actor and the reference.

    Forward passes compute logits only where they are used: the columns that
    are padding in every row of a micro-batch are dropped (``remove_padding``)
    and the LM head runs on the response positions only (HF ``logits_to_keep``),
    so a (B, P + R, V) logits tensor is never built.
    """

    kind: ClassVar[ModelKind] = "causal_lm"
    last_top_k: tuple[torch.Tensor, torch.Tensor] | None = None
    """The top-k ``(log_probs, ids)`` of the last :meth:`_log_probs` call that asked for them."""

    def _prepare_model(self, model: torch.nn.Module) -> None:
        params = inspect.signature(type(model).forward).parameters
        self._logits_to_keep = "logits_to_keep" in params

    # What _response_outputs does, for pricing passes: rows with extra model inputs (images)
    # are neither packed nor trimmed.
    def _packs_rows(self, batch: Batch) -> bool:
        return self.config.packing and model_inputs_of(batch) is None

    def _drops_padding_columns(self, batch: Batch) -> bool:
        return self.config.remove_padding and model_inputs_of(batch) is None

    def _response_outputs(
        self,
        micro: Batch,
        temperature: float,
        entropy: EntropyMode,
        extras: ResponseExtras | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Log-probs (B, R) of the responses and, unless ``entropy`` is ``none``, entropies.

        ``entropy="detached"`` computes the entropy without building its graph
        (reported, not trained on). Positions past the longest response are 0.
        ``extras``, when given, is filled from the same logits (see :class:`ResponseExtras`).
        """
        # Rows with extra model inputs (images) run as the rollout made them: packing or
        # dropping columns would cut them apart from their per-row positions and features.
        extra = model_inputs_of(micro)
        if self.config.packing and extra is None:
            return self._packed_response_outputs(micro, temperature, entropy, extras)
        responses = micro["responses"].to(self.device)
        width = responses.shape[1]
        inputs = self._model_inputs(micro)
        first, kept = 0, width
        if self.config.remove_padding and extra is None:
            first, kept = padding_columns(inputs["attention_mask"], micro["response_mask"])
            stop = inputs["input_ids"].shape[1] - width + kept
            inputs = {k: v[:, first:stop] if torch.is_tensor(v) else v for k, v in inputs.items()}
        if self._logits_to_keep:
            inputs["logits_to_keep"] = kept + 1
        with self._autocast():
            logits = self.compute_module(**inputs).logits
        if extra is not None:
            logits = _suppress(logits, extra.suppressed_token_ids(self.module))
        log_probs, ent = response_log_probs(
            logits, responses[:, :kept], temperature=temperature, with_entropy=entropy == "grad"
        )
        if entropy == "detached":
            with torch.no_grad():
                scaled = response_slice(logits.detach(), kept).float() / temperature
                ent = entropy_from_logits(scaled)
        if kept < width:
            log_probs = functional.pad(log_probs, (0, width - kept))
            ent = None if ent is None else functional.pad(ent, (0, width - kept))
        if extras is not None and extras.wanted:
            scaled = response_slice(logits, kept).float() / temperature
            ids = {key: micro[key][:, :kept].to(self.device) for key in extras.ids_keys}
            # (B, kept, k) -> (B, R, k): the positions past the longest response are 0.
            extras.fill(scaled, ids, lambda x: functional.pad(x, (0, 0, 0, width - kept)))
        return log_probs, ent

    def _packed_response_outputs(
        self,
        micro: Batch,
        temperature: float,
        entropy: EntropyMode,
        extras: ResponseExtras | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """:meth:`_response_outputs` over the micro-batch packed into one padding-free row.

        The LM head runs on the response-predicting positions only (``logits_to_keep``
        as indices); the results are scattered back into (B, R).
        """
        responses = micro["responses"].to(self.device)
        width = responses.shape[1]
        inputs = self._model_inputs(micro)
        packed = pack_rows(
            inputs["input_ids"], inputs["attention_mask"], inputs["position_ids"], width
        )
        call: dict[str, Any] = {
            "input_ids": packed.input_ids,
            "position_ids": packed.position_ids,
            "attention_mask": packed.attention_mask(self.compute_dtype),
            "use_cache": False,
        }
        if self._logits_to_keep:
            call["logits_to_keep"] = packed.keep
        with self._autocast():
            logits = self.compute_module(**call).logits[0]
        if not self._logits_to_keep:
            logits = logits[packed.keep]
        scaled = logits.float() / temperature if temperature != 1.0 else logits.float()
        chosen = scaled.gather(-1, packed.response_tokens(responses).long()[:, None])[:, 0]
        log_probs = packed.scatter(chosen - torch.logsumexp(scaled, dim=-1), width)
        ent = None
        if entropy == "grad":
            ent = packed.scatter(entropy_from_logits(scaled), width)
        elif entropy == "detached":
            with torch.no_grad():
                ent = packed.scatter(entropy_from_logits(scaled.detach()), width)
        if extras is not None and extras.wanted:
            rows, index = packed.targets
            ids = {key: micro[key].to(self.device)[rows, index] for key in extras.ids_keys}
            extras.fill(scaled, ids, lambda x: packed.scatter(x, width))
        return log_probs, ent

    def _log_probs(
        self, batch: Batch, operation: str, *, with_entropy: bool, top_k: int = 0
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Log-probs (and entropies) of the responses; with ``top_k`` also the top-k per
        position, left in :attr:`last_top_k` as ``(log_probs, ids)`` (B, R, k)."""
        require_keys(batch, SEQUENCE_KEYS, operation)
        temperature = sampling_temperature(batch)
        log_probs, entropies, top_values, top_ids = [], [], [], []
        self.module.eval()
        with torch.no_grad():
            for micro in self._forward_micro_batches(batch):
                mask = micro["response_mask"].to(self.device)
                extras = ResponseExtras(top_k=top_k)
                lp, ent = self._response_outputs(
                    micro, temperature, "grad" if with_entropy else "none", extras
                )
                log_probs.append(masked_fill_zero(lp, mask).cpu())
                if ent is not None:
                    entropies.append(masked_fill_zero(ent, mask).cpu())
                if top_k:
                    valid = mask.unsqueeze(-1).bool()
                    top_values.append(extras.top_k_log_probs.masked_fill(~valid, 0.0).cpu())
                    top_ids.append(extras.top_k_ids.masked_fill(~valid, 0).cpu())
        self.last_top_k = (torch.cat(top_values), torch.cat(top_ids)) if top_k else None
        return torch.cat(log_probs), (torch.cat(entropies) if with_entropy else None)

    def _ref_outputs(self, batch: Batch) -> Batch:
        """``ref_log_probs``; with ``batch.meta[REF_TOP_K]`` = k also the top-k per position."""
        top_k = int(batch.meta.get(REF_TOP_K) or 0)
        log_probs, _ = self._log_probs(
            batch, "compute_ref_log_prob", with_entropy=False, top_k=top_k
        )
        tensors = {"ref_log_probs": log_probs}
        if self.last_top_k is not None:
            tensors["ref_top_k_log_probs"], tensors["ref_top_k_ids"] = self.last_top_k
        return Batch.from_dict(tensors=tensors)


class ActorEngine(_CausalLMEngine):
    """The policy: log-probs, the policy update, generation access and HF export."""

    trainable: ClassVar[bool] = True
    _has_dropout: bool | None = None  # found on first use (the module is built by then)

    def compute_log_prob(self, batch: Batch) -> Batch:
        """``old_log_probs`` and ``entropys`` (both (B, R), 0 where masked) of the responses."""
        log_probs, entropy = self._log_probs(batch, "compute_log_prob", with_entropy=True)
        return Batch.from_dict(tensors={"old_log_probs": log_probs, "entropys": entropy})

    def compute_ref_log_prob(self, batch: Batch) -> Batch:
        """``ref_log_probs`` under the base model: the LoRA actor with its adapters disabled.

        This is the reference policy when the reference role shares the actor's
        model (no second copy of the base); only a LoRA actor has it.
        """
        if not self.lora:
            raise HfsdkError(
                f"{self.role} has no LoRA adapters, so its base model is its trained weights, "
                "not the reference; build a ReferenceEngine for the reference role"
            )
        from hfsdk_backend_fsdp.lora import adapters_disabled

        with adapters_disabled(self.module):
            return self._ref_outputs(batch)

    # -- the rollout contract's actor side (hfsdk.ActorSource) ---------------------------

    weights_version: int = 0
    """Incremented by every update and checkpoint load."""
    last_weights_metrics: dict[str, float] = {}  # noqa: RUF012 (replaced, never mutated)
    """What the last complete :meth:`hf_weights` iteration cost this rank."""
    gathers: int = 0
    """How many times :meth:`live_hf_module` gathered the sharded module (``gather_drop:N``)."""
    weight_probes: dict[str, Any] = {}  # noqa: RUF012 (replaced per stream)
    """Each merged LoRA weight's probe (:func:`hfsdk_backend_common.low_rank_probe`), set by
    :meth:`hf_weights` before it yields that weight; empty without LoRA."""

    @property
    def hf_config(self) -> Any:
        """The actor's transformers config."""
        return self.module.config

    @property
    def generation_eos_ids(self) -> list[int]:
        """EOS ids of the model's generation config (may be empty)."""
        configured = self.module.generation_config.eos_token_id
        if configured is None:
            return []
        return [configured] if isinstance(configured, int) else list(configured)

    @contextlib.contextmanager
    def generation_module(self) -> Iterator[torch.nn.Module]:
        """The actor's own module with full weights, in eval mode, for ``generate``.

        Under FSDP2 the shards are gathered once on entry and freed on exit; no
        second copy of the model is kept.
        """
        was_training = self.module.training
        self.module.eval()
        try:
            restore = self.config.reshard_after_forward
            with sharding.gathered(self.module, reshard_after_forward=restore), torch.no_grad():
                yield self.module
        finally:
            self.module.train(was_training)

    @contextlib.contextmanager
    def live_hf_module(self, *, gather: bool = False) -> Iterator[torch.nn.Module | None]:
        """The actor's own module when it generates as is: unsharded at float32, or gathered.

        An unsharded actor that computes in bfloat16 keeps float32 weights
        (autocast): ``None``, so generation gets a copy in the compute dtype.
        A sharded one is gathered only with ``gather`` (``weight_sync: gather``).
        """
        sharded = sharding.is_sharded(self.module)
        if (sharded and not gather) or (not sharded and self.config.dtype != "float32"):
            yield None
            return
        if self.lora:
            # A peft module is no plain HF model: the rollout gets merged weights instead.
            yield None
            return
        if not sharded:  # the module's own tensors: nothing moves, nothing to verify
            self.last_weights_metrics = {}
            with self.generation_module() as module:
                yield module
            return
        from hfsdk import take_fault
        from hfsdk_backend_common import WeightSyncMismatch

        # Taken before the gather: what the shards hold, as FSDP will gather them.
        shard_sums = sharding.shard_bit_sums(self.module, self.param_dtype)
        self.gathers += 1
        corrupt = next(iter(shard_sums)) if take_fault("gather_drop", self.gathers) else None
        with self.generation_module() as module:
            problem = sharding.check_gathered(
                module, shard_sums, self.dp, self.device, corrupt=corrupt
            )
            if problem is not None:
                raise WeightSyncMismatch(
                    f"the gathered module of the actor's weights version {self.weights_version} "
                    f"is not what its shards hold: {problem}; generating from it would sample "
                    "from weights other than the actor's"
                )
            self.last_weights_metrics = {
                "sync/verified": 1.0,
                "sync/gathered_verified": float(len(shard_sums)),
            }
            yield module

    def hf_weights(self) -> Iterator[tuple[str, torch.Tensor]]:
        """The actor's weights as (HF parameter name, full tensor) pairs, one at a time.

        Under FSDP2 one FSDP unit (transformer block) is all-gathered at a time
        and resharded before the next (:func:`.sharding.stream_full_parameters`),
        so at most one block of full tensors exists beside the shards — every
        rank of the group must consume the whole iterator (the gathers are
        collective). Tensors are in the compute dtype; tied weights appear once.
        Sets :attr:`last_stream` and :attr:`last_weights_metrics` when exhausted.
        """
        stats = sharding.StreamStats()
        sharded = sharding.is_sharded(self.module)
        stream = sharding.stream_full_parameters(self.module, self.dp, stats)
        if self.lora:
            # HF names and W + (alpha/r)·B·A: the rollout sees the merged model, never peft's.
            from hfsdk import take_fault
            from hfsdk_backend_fsdp.lora import fan_in_fan_out_modules, merged_weights, scaling

            self.weight_probes = {}  # each merged weight's probe, set before it is yielded
            stream = merged_weights(
                ((n, t.detach()) for n, t in stream),
                scaling(self.module),
                fan_in_fan_out_modules(self.module),
                probes=self.weight_probes,
                sent_dtype=self.compute_dtype,
                lose_first_update=take_fault("lora_merge_bad", self.weights_version),
            )
        for name, tensor in stream:
            yield name, tensor.detach().to(self.compute_dtype)
        self.last_stream = stats
        # Unsharded, the module's own tensors were yielded: nothing received, nothing extra.
        self.last_weights_metrics = {}
        if sharded:
            self.last_weights_metrics = {
                "perf/reshard_bytes": float(stats.received_bytes),
                "perf/reshard_peak_extra_bytes": float(stats.peak_unit_bytes),
            }

    def generation_shards(self, config: Any) -> GenerationShards | None:
        """Tensor-parallel slices of the FSDP shards at ``actor.rollout_layout.tp > 1``, else None.

        ``config`` (the rollout section) is not needed: the layout is the actor's.
        """
        from hfsdk_backend_fsdp.tp_rollout import SliceShards, resolve_rollout_tp

        tg = resolve_rollout_tp(self.config.rollout_layout, self.dp.size, self.hf_config.to_dict())
        if tg == 1:
            return None
        return SliceShards(self, tg=tg)

    def load_checkpoint(self, directory: str | Path) -> None:
        """Restore a checkpoint (see :meth:`FSDPEngine.load_checkpoint`); the weights changed."""
        super().load_checkpoint(directory)
        self.weights_version += 1

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output (see :meth:`FSDPEngine.load_state_dict`)."""
        super().load_state_dict(state)
        self.weights_version += 1

    def update_actor(self, batch: Batch, objective: ActorObjective) -> dict[str, float]:
        """Train the policy on ``batch`` (``ppo_epochs`` × mini-batches × micro-batches).

        Needs ``input_ids``, ``attention_mask``, ``responses``, ``response_mask``,
        ``old_log_probs``, ``advantages`` (and ``ref_log_probs`` for the KL term).
        ``old_log_probs`` may be left out: when the update is exactly on-policy
        (one epoch, one mini-batch, no dropout) the sampling policy is the
        current one, so the detached current log-probs stand in for them
        (ratio 1, as verl and TRL do) and no separate forward pass runs;
        otherwise they are computed here first, before any optimizer step.
        Without old log-probs, a batch's ``rollout_log_probs`` are compared here
        (``rollout/log_prob_diff_max`` / ``_mean``, see
        :class:`~hfsdk_backend_common.sync_check.RolloutSyncCheck`).
        Returns metrics: ``actor/pg_loss``, ``actor/entropy``, ``actor/kl`` (with a
        reference), the policy loss's own metrics, ``actor/grad_norm``, ``actor/lr``.
        Losses are this rank's share of each mini-batch loss × the rank count, so
        their mean over ranks is the mini-batch loss.
        """
        keys = list(UPDATE_KEYS)
        if objective.kl_loss_coef > 0:
            keys.append("ref_log_probs")
        require_keys(batch, keys, "update_actor")
        sync = RolloutSyncCheck.for_update(batch)
        computed_old = "old_log_probs" not in batch and not self.is_on_policy(len(batch))
        if computed_old:
            # Several optimizer steps (or dropout): the sampler is the policy before the first.
            batch = batch.union(self.compute_log_prob(batch).select(["old_log_probs"]))
        batch = without_padding_weight(batch)
        if sync is not None and computed_old:
            sync.observe(batch, batch["old_log_probs"])
        # Otherwise the training forward before the first optimizer step is the sampler's.
        first_forward = sync if sync is not None and not computed_old else None
        has_reference = "ref_log_probs" in batch
        temperature = sampling_temperature(batch)
        metrics = MetricAccumulator(self.dp.size)
        self.module.train()
        for epoch in range(self.config.ppo_epochs):
            for mini in self._minibatches(batch, epoch):
                counts = self._global_counts(mini["response_mask"])
                agg = self._aggregation(
                    mini, objective.loss_agg_mode, objective.norm_length, counts
                )
                self.optimizer.zero_grad(set_to_none=True)
                for micro in self._train_micro_batches(mini):
                    self._actor_micro_step(
                        micro, objective, agg, counts, temperature, has_reference, metrics,
                        first_forward,
                    )  # fmt: skip
                self._optimizer_step(metrics, "actor")
                metrics.end_minibatch()
                first_forward = None
        for name, value in (sync.metrics() if sync is not None else {}).items():
            metrics.add_mean(name, value)
        self.weights_version += 1
        return self._finish_update(metrics, "actor")

    def is_on_policy(self, local_rows: int) -> bool:
        """Whether an update of ``local_rows`` rows per rank may skip the old log-probs.

        One epoch of one mini-batch, and a model without dropout (its training
        forward must equal the sampler's; see :mod:`hfsdk_backend_common.sync_check`).
        """
        if not self.config.updates_in_one_pass(local_rows * self.dp.size):
            return False
        if self._has_dropout is None:
            self._has_dropout = model_has_dropout(self.module)
        return not self._has_dropout

    def _actor_micro_step(
        self,
        micro: Batch,
        objective: ActorObjective,
        agg: LossAggregation,
        counts: LossCounts,
        temperature: float,
        has_reference: bool,
        metrics: MetricAccumulator,
        sync: RolloutSyncCheck | None = None,
    ) -> None:
        # Entropy is only trained on with a bonus; otherwise it is reported without a graph.
        extras = ResponseExtras(ids_keys=objective.ids_keys)
        log_prob, entropy = self._response_outputs(
            micro, temperature, "grad" if objective.entropy_coef > 0 else "detached", extras
        )
        assert entropy is not None
        if sync is not None:
            sync.observe(micro, log_prob)
        loss = actor_micro_loss(
            objective,
            micro,
            log_prob,
            entropy,
            aggregation=agg,
            counts=counts,
            has_reference=has_reference,
            metrics=metrics,
            ids_log_probs=extras.ids_log_probs,
        )
        loss.backward()


class ReferenceEngine(_CausalLMEngine):
    """The frozen reference policy: no gradients, no optimizer, eval mode."""

    trainable: ClassVar[bool] = False

    def compute_ref_log_prob(self, batch: Batch) -> Batch:
        """``ref_log_probs`` (B, R) of the responses under the reference policy (0 where masked).

        With ``batch.meta[hfsdk.REF_TOP_K]`` = k it also returns the k most likely tokens of
        every response position: ``ref_top_k_log_probs`` and ``ref_top_k_ids`` (B, R, k).
        """
        return self._ref_outputs(batch)
