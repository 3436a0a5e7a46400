"""SFT's single-controller program: tokenize the step's given responses, one actor update."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from hfsdk import Algorithm, HfsdkError

if TYPE_CHECKING:
    # The batch helpers (and torch) load on first use: `hfsdk list` and the planner import specs.
    from hfsdk import Batch
    from hfsdk_sft.targets import SupervisedRows

logger = logging.getLogger(__name__)


class SFTAlgorithm(Algorithm):
    """Supervised fine-tuning: the NLL of given responses, assistant tokens only, no sampling."""

    _drops_said = False
    """Whether the run's log has said that rows longer than ``max_length`` are dropped."""

    def _supervised(self, prompts: Batch) -> SupervisedRows:
        from hfsdk_datasets import resolve_use_template
        from hfsdk_sft.targets import supervised_batch

        tokenizer = self.tokenizer
        return supervised_batch(
            prompts,
            tokenizer,
            config=self.algo_config,
            prompt_key=self.config.data.prompt_key,
            use_template=resolve_use_template(tokenizer, self.config.data.apply_chat_template),
        )

    def _step_rows(self, prompts: Batch) -> SupervisedRows:
        """The step's rows. Rows all longer than ``algorithm.max_length`` are replaced by the
        stream's next ones (:func:`draw_step_rows`; ``dropped`` counts every drawn row left
        out)."""
        import attrs

        from hfsdk_supervised_data.step_draws import draw_step_rows

        stream = self.prompts.next_batch if self.context.prompts is not None else None
        draws = draw_step_rows(self._supervised, prompts, lambda d: d.batch is not None, stream)
        return attrs.evolve(draws[-1], dropped=sum(d.dropped for d in draws))

    def step(self, prompts: Batch) -> dict[str, float]:
        """Rows → (prompt, response) tokens with the assistant mask → ``update_actor`` (``nll``)."""
        with self.stage("data"):
            rows = self._step_rows(prompts)
        if rows.batch is None:
            from hfsdk_supervised_data.step_draws import REDRAWS

            redrawn = (
                f" (and of the {REDRAWS} steps' rows drawn after it)"
                if self.context.prompts is not None
                else ""
            )
            raise HfsdkError(
                f"every row of this step{redrawn} is longer than algorithm.max_length="
                f"{self.algo_config.max_length} tokens; raise it or leave the long rows out of "
                "the data"
            )
        if rows.dropped and not self._drops_said:
            self._drops_said = True
            logger.warning(
                "dropped %d of this step's rows longer than algorithm.max_length=%d tokens (and "
                "so on in later steps: sft/dropped_rows counts them); raise it to train on them",
                rows.dropped, self.algo_config.max_length,
            )  # fmt: skip
        batch = rows.batch
        with self.stage("update_actor"):
            self.record(self.actor.update_actor(batch))
        # The per-token NLL (as val/loss), not actor/pg_loss: that is the objective as
        # loss_agg_mode aggregates it (a per-sequence sum under seq-mean-token-sum).
        self.metrics["sft/loss"] = self.metrics.get("actor/nll", float("nan"))
        self.metrics["sft/trained_tokens"] = float(batch["response_mask"].sum())
        self.metrics["sft/dropped_rows"] = float(rows.dropped)
        return self.finish(batch)

    def generation_input(
        self, prompts: Batch, *, n: int | None = None, greedy: bool = False
    ) -> Batch:
        """What validation samples from: each prompt cut before its conversation's answer.

        SFT trains on given responses and samples only to validate. With
        ``data.prompt_key`` naming ``algorithm.messages_key`` the loader's prompt is the whole
        conversation, reference answer included; sampling after it scored copies of the
        answer. The prompt is cut where a row's training prompt ends
        (:func:`hfsdk_sft.targets.context_prompts`).
        """
        from hfsdk import run_tool_schemas
        from hfsdk_datasets import resolve_use_template
        from hfsdk_sft.targets import context_prompts

        tokenizer = self.tokenizer
        cut = context_prompts(
            prompts,
            tokenizer,
            config=self.algo_config,
            prompt_key=self.config.data.prompt_key,
            use_template=resolve_use_template(tokenizer, self.config.data.apply_chat_template),
            tools=lambda: run_tool_schemas(self.config),
        )
        return super().generation_input(cut, n=n, greedy=greedy)

    def validation_metrics(self, prompts: Batch) -> dict[str, float]:
        """``val/loss``: the per-token NLL of the validation rows' responses (no update).

        Validation data without responses (prompts and reward columns only) gets none.
        """
        cfg = self.algo_config
        if not {cfg.messages_key, cfg.response_key} & set(prompts.non_tensor_keys):
            return {}
        rows = self._supervised(prompts)
        if rows.batch is None:
            return {}
        batch = rows.batch
        log_probs = self.actor.compute_log_prob(batch)["old_log_probs"]
        mask = batch["response_mask"].float()
        return {"val/loss": float(-(log_probs * mask).sum() / mask.sum().clamp(min=1.0))}
