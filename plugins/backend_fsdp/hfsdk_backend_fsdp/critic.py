"""The critic engine: a value head on the causal LM's backbone, one value per token."""

from __future__ import annotations

import warnings
from typing import ClassVar

import torch

from hfsdk import Batch, masked_fill_zero, masked_mean
from hfsdk_backend_common.engine_support import (
    MetricAccumulator,
    require_keys,
    without_padding_weight,
)
from hfsdk_backend_common.objectives import CriticObjective
from hfsdk_backend_common.packing import pack_rows
from hfsdk_backend_common.token_ops import response_slice
from hfsdk_backend_fsdp.engine import FSDPEngine
from hfsdk_backend_fsdp.models import ModelKind

SEQUENCE_KEYS = ("input_ids", "attention_mask", "responses", "response_mask")
UPDATE_KEYS = (*SEQUENCE_KEYS, "values", "returns")


class CriticEngine(FSDPEngine):
    """``V(s_t)`` for every response token: the value of the state before generating it."""

    kind: ClassVar[ModelKind] = "token_value"
    trainable: ClassVar[bool] = True

    def _values(self, micro: Batch) -> torch.Tensor:
        width = micro["responses"].shape[1]
        packed = None
        inputs = self._model_inputs(micro)
        if self.config.packing:
            packed = pack_rows(
                inputs["input_ids"], inputs["attention_mask"], inputs["position_ids"], width
            )
            inputs = {
                "input_ids": packed.input_ids,
                "position_ids": packed.position_ids,
                "attention_mask": packed.attention_mask(self.compute_dtype),
                "use_cache": False,
            }
        with warnings.catch_warnings():
            # The token-classification head's logits reach FSDP2 as a view, so it warns
            # about in-place ops on them; only out-of-place ops follow here.
            warnings.filterwarnings("ignore", message="FSDP2-wrapped module .* view tensor")
            with self._autocast():
                logits = self.compute_module(**inputs).logits
        per_token = logits[..., 0].float()
        if packed is not None:
            values = packed.scatter(per_token[0, packed.keep], width)
        else:
            values = response_slice(per_token, width)
        return masked_fill_zero(values, micro["response_mask"].to(self.device))

    def compute_values(self, batch: Batch) -> Batch:
        """``values`` (B, R), 0 where the response mask is 0."""
        require_keys(batch, SEQUENCE_KEYS, "compute_values")
        self.module.eval()
        with torch.no_grad():
            parts = [self._values(micro).cpu() for micro in self._forward_micro_batches(batch)]
        return Batch.from_dict(tensors={"values": torch.cat(parts)})

    def update_critic(self, batch: Batch, objective: CriticObjective) -> dict[str, float]:
        """Fit the values to ``returns`` (``ppo_epochs`` × mini-batches × micro-batches).

        ``values`` in the batch are the old values (for value clipping). Returns
        ``critic/vf_loss``, the value loss's own metrics, ``critic/vpred_mean``,
        ``critic/grad_norm`` and ``critic/lr``.
        """
        require_keys(batch, UPDATE_KEYS, "update_critic")
        batch = without_padding_weight(batch)
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
                    mask = micro["response_mask"].to(self.device)
                    vpreds = self._values(micro)
                    loss, loss_metrics = objective.value_loss(
                        values=vpreds,
                        old_values=micro["values"].to(self.device),
                        returns=micro["returns"].to(self.device),
                        response_mask=mask,
                        config=objective.value_loss_config,
                        aggregation=agg,
                    )
                    loss.backward()
                    metrics.add_share("critic/vf_loss", float(loss.detach()))
                    # Per-token means of this micro-batch: weighted by its valid tokens.
                    tokens = float((mask != 0).sum())
                    vpred_mean = float(masked_mean(vpreds.detach(), mask)) if tokens else 0.0
                    metrics.add_token_share("critic/vpred_mean", vpred_mean, tokens, counts)
                    for name, value in loss_metrics.items():
                        metrics.add_token_share(f"critic/{name}", float(value), tokens, counts)
                self._optimizer_step(metrics, "critic")
                metrics.end_minibatch()
        return self._finish_update(metrics, "critic")
