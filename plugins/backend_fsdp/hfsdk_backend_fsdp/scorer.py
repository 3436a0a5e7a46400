"""Reward and cost models: a sequence-classification head read at the last response token."""

from __future__ import annotations

from typing import ClassVar

import torch
from transformers import PreTrainedModel

from hfsdk import Batch
from hfsdk_backend_common.engine_support import require_keys
from hfsdk_backend_common.token_ops import last_token_index
from hfsdk_backend_fsdp.engine import FSDPEngine
from hfsdk_backend_fsdp.models import ModelKind

SEQUENCE_KEYS = ("input_ids", "attention_mask", "responses", "response_mask")


class ScoreEngine(FSDPEngine):
    """A frozen scoring model: one scalar per sample from its last response token.

    The head's output is read at the last token of each response (its EOS
    when it has one) whatever the padding token is, so tokenizers whose pad
    and EOS ids coincide score correctly too.
    """

    kind: ClassVar[ModelKind] = "sequence_score"
    trainable: ClassVar[bool] = False

    def _prepare_model(self, model: PreTrainedModel) -> None:
        self._head = model.score

    def compute_scores(self, batch: Batch, output_key: str = "rm_scores") -> Batch:
        """``output_key`` (default ``rm_scores``), shape (B,): each response's score."""
        require_keys(batch, SEQUENCE_KEYS, "compute_scores")
        captured: list[torch.Tensor] = []
        handle = self._head.register_forward_hook(lambda _m, _i, out: captured.append(out))
        scores = []
        try:
            self.module.eval()
            with torch.no_grad():
                for micro in self._forward_micro_batches(batch):
                    captured.clear()
                    self._forward(micro)
                    per_token = captured[-1][..., 0].float()
                    prompt_length = micro["input_ids"].shape[1] - micro["responses"].shape[1]
                    index = last_token_index(micro["response_mask"], prompt_length).to(self.device)
                    scores.append(per_token.gather(1, index[:, None])[:, 0].cpu())
        finally:
            handle.remove()
        return Batch.from_dict(tensors={output_key: torch.cat(scores)})
