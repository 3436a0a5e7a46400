"""Reward and cost models: a sequence-classification head read at the last response token."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import torch
from transformers import PreTrainedModel

from hfsdk import Batch, HfsdkError, row_group
from hfsdk_backend_common.engine_support import (
    MetricAccumulator,
    finite_scores,
    require_keys,
    without_padding_weight,
)
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

    def _packs_rows(self, batch: Batch) -> bool:
        return False  # every pass scores padded rows (packing is refused with the config)

    def _head_scores(self, micro: Batch) -> torch.Tensor:
        """(B,) float32 head outputs at each row's last response token (graph kept)."""
        captured: list[torch.Tensor] = []
        handle = self._head.register_forward_hook(lambda _m, _i, out: captured.append(out))
        try:
            output = self._forward(micro)
        finally:
            handle.remove()
        per_token = captured[-1][..., 0].float()
        prompt_length = micro["input_ids"].shape[1] - micro["responses"].shape[1]
        index = last_token_index(micro["response_mask"], prompt_length).to(self.device)
        scores = per_token.gather(1, index[:, None])[:, 0]
        if torch.is_grad_enabled() and output.logits.requires_grad:
            scores = _KeepInGraph.apply(scores, output.logits)
        return scores

    def compute_scores(self, batch: Batch, output_key: str = "rm_scores") -> Batch:
        """``output_key`` (default ``rm_scores``), shape (B,): each response's score."""
        require_keys(batch, SEQUENCE_KEYS, "compute_scores")
        scores = []
        was_training = self.module.training
        self.module.eval()
        try:
            with torch.no_grad():
                for micro in self._forward_micro_batches(batch):
                    scores.append(self._head_scores(micro).cpu())
        finally:
            self.module.train(was_training)
        return Batch.from_dict(tensors={output_key: finite_scores(torch.cat(scores))})


class _KeepInGraph(torch.autograd.Function):
    """``scores`` as they are, with the model's own output in their graph (a zero gradient).

    FSDP2 gathers the root module's sharded weights (embeddings, final norm, head) for
    the backward in a hook on the root's outputs; scores read from the head by a forward
    hook never reach that output, so on two ranks the backward found the root's weights
    freed (``setStorage: ... out of bounds for storage of size 0``)."""

    @staticmethod
    def forward(ctx: Any, scores: torch.Tensor, output: torch.Tensor) -> torch.Tensor:
        ctx.output_like = (output.shape, output.dtype, output.device)
        return scores.view_as(scores)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        shape, dtype, device = ctx.output_like
        return grad, torch.zeros(shape, dtype=dtype, device=device)


ScoreLoss = Callable[[torch.Tensor, Batch], tuple[torch.Tensor, dict[str, torch.Tensor]]]
"""``loss(scores, micro) -> (per-group losses (G,), per-group metrics {name: (G,)})``.

``scores`` (B,) are the head's outputs (with gradients) of the micro-batch's
rows, which come in groups of ``hfsdk.row_group(micro)`` consecutive rows (2
for preference pairs: chosen, then rejected); ``G = B / group``."""


class TrainableScoreEngine(ScoreEngine):
    """A sequence scorer being trained (``score_model`` roles): a reward or cost model.

    The head and backbone are the :class:`ScoreEngine`'s (the export loads as a
    ``reward``/``cost`` role's model as is); :meth:`update_score_model` fits
    them with the loss the algorithm hands over (Bradley-Terry for a reward
    model), averaged over the row groups of each mini-batch on every rank.
    """

    trainable: ClassVar[bool] = True

    def _global_groups(self, valid: torch.Tensor) -> float:
        count = torch.tensor([float(valid.sum())], dtype=torch.float64, device=self.device)
        if self.dp.distributed:
            import torch.distributed as dist

            dist.all_reduce(count, op=dist.ReduceOp.SUM, group=self.dp.group)
        return float(count[0])

    def update_score_model(self, batch: Batch, loss: ScoreLoss) -> dict[str, Any]:
        """Minimise ``loss`` over ``batch`` (``ppo_epochs`` × mini-batches × micro-batches).

        Each mini-batch's loss is the mean over its valid row groups on all ranks
        (a group with a padding row of the dispatch is left out); its metrics are
        the same means, reported as ``score_model/<name>`` with ``score_model/loss``,
        ``score_model/grad_norm`` and ``score_model/lr``.
        """
        require_keys(batch, SEQUENCE_KEYS, "update_score_model")
        group = row_group(batch)
        if len(batch) % group:
            raise HfsdkError(
                f"update_score_model got {len(batch)} rows on one rank, which is not a whole "
                f"number of groups of {group}; send the pairs' rows to ranks in whole groups"
            )
        batch = without_padding_weight(batch)
        metrics = MetricAccumulator(self.dp.size)
        self.module.train()
        for epoch in range(self.config.ppo_epochs):
            for mini in self._minibatches(batch, epoch):
                valid_rows = mini["response_mask"].sum(dim=-1) > 0
                total = self._global_groups(valid_rows.view(-1, group).all(dim=-1))
                self.optimizer.zero_grad(set_to_none=True)
                for micro in self._train_micro_batches(mini):
                    rows = micro["response_mask"].sum(dim=-1) > 0
                    valid = rows.view(-1, group).all(dim=-1).to(self.device).float()
                    per_group, stats = loss(self._head_scores(micro), micro)
                    share = self.dp.size / total if total else 0.0
                    value = (per_group * valid).sum() * share
                    value.backward()
                    metrics.add_share("score_model/loss", float(value.detach()))
                    for name, per in stats.items():
                        kept = float((per.detach().float() * valid).sum()) * share
                        metrics.add_share(f"score_model/{name}", kept)
                self._optimizer_step(metrics, "score_model")
                metrics.end_minibatch()
        return self._finish_update(metrics, "score_model")
