"""The actor (trained causal LM) and the reference (frozen causal LM) engines."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import ClassVar

import torch

from hfsdk import (
    Batch,
    LossAggregation,
    aggregate_loss,
    entropy_bonus,
    kl_loss,
    masked_fill_zero,
)
from hfsdk_backend_fsdp import sharding
from hfsdk_backend_fsdp.engine import FSDPEngine, MetricAccumulator, require_keys
from hfsdk_backend_fsdp.models import ModelKind
from hfsdk_backend_fsdp.objectives import ActorObjective
from hfsdk_backend_fsdp.token_ops import response_log_probs

SEQUENCE_KEYS = ("input_ids", "attention_mask", "responses", "response_mask")
UPDATE_KEYS = (*SEQUENCE_KEYS, "old_log_probs", "advantages")


def sampling_temperature(batch: Batch) -> float:
    """The temperature the responses were sampled with (``meta['temperature']``; 1 if greedy)."""
    temperature = float(batch.meta.get("temperature", 1.0))
    return temperature if temperature > 0 else 1.0


class _CausalLMEngine(FSDPEngine):
    """Shared log-prob computation of the actor and the reference."""

    kind: ClassVar[ModelKind] = "causal_lm"

    def _log_probs(
        self, batch: Batch, operation: str, *, with_entropy: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        require_keys(batch, SEQUENCE_KEYS, operation)
        temperature = sampling_temperature(batch)
        log_probs, entropies = [], []
        self.module.eval()
        with torch.no_grad():
            for micro in self._forward_micro_batches(batch):
                logits = self._forward(micro).logits
                responses = micro["responses"].to(self.device)
                mask = micro["response_mask"].to(self.device)
                lp, ent = response_log_probs(
                    logits, responses, temperature=temperature, with_entropy=with_entropy
                )
                log_probs.append(masked_fill_zero(lp, mask).cpu())
                if ent is not None:
                    entropies.append(masked_fill_zero(ent, mask).cpu())
        return torch.cat(log_probs), (torch.cat(entropies) if with_entropy else None)


class ActorEngine(_CausalLMEngine):
    """The policy: log-probs, the policy update, generation access and HF export."""

    trainable: ClassVar[bool] = True

    def compute_log_prob(self, batch: Batch) -> Batch:
        """``old_log_probs`` and ``entropys`` (both (B, R), 0 where masked) of the responses."""
        log_probs, entropy = self._log_probs(batch, "compute_log_prob", with_entropy=True)
        return Batch.from_dict(tensors={"old_log_probs": log_probs, "entropys": entropy})

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

    def update_actor(self, batch: Batch, objective: ActorObjective) -> dict[str, float]:
        """Train the policy on ``batch`` (``ppo_epochs`` × mini-batches × micro-batches).

        Needs ``input_ids``, ``attention_mask``, ``responses``, ``response_mask``,
        ``old_log_probs``, ``advantages`` (and ``ref_log_probs`` for the KL term).
        Returns metrics: ``actor/pg_loss``, ``actor/entropy``, ``actor/kl`` (with a
        reference), the policy loss's own metrics, ``actor/grad_norm``, ``actor/lr``.
        Losses are this rank's share of each mini-batch loss × the rank count, so
        their mean over ranks is the mini-batch loss.
        """
        keys = list(UPDATE_KEYS)
        if objective.kl_loss_coef > 0:
            keys.append("ref_log_probs")
        require_keys(batch, keys, "update_actor")
        has_reference = "ref_log_probs" in batch
        temperature = sampling_temperature(batch)
        metrics = MetricAccumulator()
        self.module.train()
        for epoch in range(self.config.ppo_epochs):
            for mini in self._minibatches(batch, epoch):
                agg = self._aggregation(mini, objective.loss_agg_mode, objective.norm_length)
                self.optimizer.zero_grad(set_to_none=True)
                for micro in mini.split(self.config.micro_batch_size):
                    self._actor_micro_step(
                        micro, objective, agg, temperature, has_reference, metrics
                    )
                self._optimizer_step(metrics, "actor")
                metrics.end_minibatch()
        return self._finish_update(metrics, "actor")

    def _actor_micro_step(
        self,
        micro: Batch,
        objective: ActorObjective,
        agg: LossAggregation,
        temperature: float,
        has_reference: bool,
        metrics: MetricAccumulator,
    ) -> None:
        mask = micro["response_mask"].to(self.device)
        logits = self._forward(micro).logits
        log_prob, entropy = response_log_probs(
            logits, micro["responses"].to(self.device), temperature=temperature
        )
        assert entropy is not None
        pg_loss, pg_metrics = objective.policy_loss(
            log_prob=log_prob,
            old_log_prob=micro["old_log_probs"].to(self.device),
            advantages=micro["advantages"].to(self.device),
            response_mask=mask,
            config=objective.policy_loss_config,
            aggregation=agg,
        )
        loss = pg_loss
        if objective.entropy_coef > 0:
            entropy_loss, _ = entropy_bonus(entropy, mask, agg, objective.entropy_coef)
            loss = loss + entropy_loss
        metrics.add_share("actor/entropy", float(aggregate_loss(entropy.detach(), mask, agg)))
        if has_reference:
            kl_value, _ = kl_loss(
                log_prob,
                micro["ref_log_probs"].to(self.device),
                mask,
                agg,
                objective.kl_estimator or "k1",
            )
            if objective.kl_loss_coef > 0:
                loss = loss + objective.kl_loss_coef * kl_value
            metrics.add_share("actor/kl", float(kl_value.detach()))
        loss.backward()
        metrics.add_share("actor/pg_loss", float(pg_loss.detach()))
        metrics.add_share("actor/loss", float(loss.detach()))
        for name, value in pg_metrics.items():
            metrics.add_mean(f"actor/{name}", float(value))


class ReferenceEngine(_CausalLMEngine):
    """The frozen reference policy: no gradients, no optimizer, eval mode."""

    trainable: ClassVar[bool] = False

    def compute_ref_log_prob(self, batch: Batch) -> Batch:
        """``ref_log_probs`` (B, R) of the responses under the reference policy (0 where masked)."""
        log_probs, _ = self._log_probs(batch, "compute_ref_log_prob", with_entropy=False)
        return Batch.from_dict(tensors={"ref_log_probs": log_probs})
