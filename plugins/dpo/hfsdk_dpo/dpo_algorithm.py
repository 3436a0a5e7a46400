"""DPO's single-controller program: pairs -> policy and reference log-probs -> one update."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from hfsdk import Algorithm, HfsdkError

if TYPE_CHECKING:
    # torch and the batch helpers load on first use: `hfsdk list` and the planner import specs.
    import torch

    from hfsdk import Batch
    from hfsdk_dpo.pairs import PairRows

logger = logging.getLogger(__name__)


def preference_metrics(
    log_prob: torch.Tensor,
    ref_log_prob: torch.Tensor,
    response_mask: torch.Tensor,
    beta: float,
    label_smoothing: float = 0.0,
) -> dict[str, float]:
    """``dpo/*`` of an interleaved pair batch: implicit rewards, margin, accuracy, and the
    loss the update takes (with ``policy_loss.label_smoothing``, as :func:`dpo_loss`)."""
    from hfsdk_dpo.losses import pair_rewards, smoothed_pair_loss

    chosen, rejected = pair_rewards(log_prob, ref_log_prob, response_mask, beta)
    margin = chosen - rejected
    return {
        "dpo/reward_chosen": float(chosen.mean()),
        "dpo/reward_rejected": float(rejected.mean()),
        "dpo/reward_margin": float(margin.mean()),
        "dpo/reward_accuracy": float((margin > 0).float().mean()),
        "dpo/loss": float(smoothed_pair_loss(margin, label_smoothing).mean()),
    }


class DPOAlgorithm(Algorithm):
    """DPO: a sigmoid loss on preference pairs against a frozen reference, no sampling."""

    _drops_said = False
    """Whether the run's log has said that pairs longer than ``max_length`` are dropped."""

    def _pairs(self, rows: Batch) -> PairRows:
        from hfsdk_datasets import resolve_use_template
        from hfsdk_dpo.pairs import pair_batch

        tokenizer = self.tokenizer
        return pair_batch(
            rows,
            tokenizer,
            config=self.algo_config,
            prompt_key=self.config.data.prompt_key,
            use_template=resolve_use_template(tokenizer, self.config.data.apply_chat_template),
        )

    def _step_pairs(self, prompts: Batch) -> PairRows:
        """The step's pairs. Rows whose pairs are all longer than ``algorithm.max_length``
        are replaced by the stream's next ones (:func:`draw_step_rows`; ``dropped`` counts
        every drawn pair left out)."""
        import attrs

        from hfsdk_supervised_data.step_draws import draw_step_rows

        stream = self.prompts.next_batch if self.context.prompts is not None else None
        draws = draw_step_rows(self._pairs, prompts, lambda d: d.batch is not None, stream)
        return attrs.evolve(draws[-1], dropped=sum(d.dropped for d in draws))

    def _log_probs(self, batch: Batch) -> Batch:
        """The batch with the policy's (``old_log_probs``) and the reference's log-probs."""
        reference = self.spec.roles_of_kind("frozen_policy")[0]
        calls = [
            ("old_log_prob", self.actor.compute_log_prob),
            ("ref_log_prob", self.role(reference).compute_ref_log_prob),
        ]
        for part in self.concurrently(batch, calls):
            batch = batch.union(part.select([k for k in part.tensor_keys if k != "entropys"], []))
        return batch

    def step(self, prompts: Batch) -> dict[str, float]:
        """Pairs → log-probs (policy, reference) → ``dpo/*`` metrics → ``update_actor`` (dpo)."""
        with self.stage("data"):
            rows = self._step_pairs(prompts)
        if rows.batch is None:
            from hfsdk_supervised_data.step_draws import REDRAWS

            raise HfsdkError(
                f"every pair of this step (and of the {REDRAWS} steps' rows drawn after it) is "
                f"longer than algorithm.max_length={self.algo_config.max_length} tokens; raise "
                "it or leave the long rows out of the data"
            )
        if rows.dropped and not self._drops_said:
            self._drops_said = True
            logger.warning(
                "dropped %d of this step's pairs longer than algorithm.max_length=%d tokens (and "
                "so on in later steps: dpo/dropped_pairs counts them); raise it to train on them",
                rows.dropped, self.algo_config.max_length,
            )  # fmt: skip
        batch = self._log_probs(rows.batch)
        mask = batch["response_mask"]
        self.record(
            preference_metrics(
                batch["old_log_probs"],
                batch["ref_log_probs"],
                mask,
                self.config.policy_loss.beta,
                self.config.policy_loss.label_smoothing,
            )
        )
        self.metrics["dpo/dropped_pairs"] = float(rows.dropped)
        with self.stage("update_actor"):
            self.record(self.actor.update_actor(self._training_view(batch)))
        return self.finish(batch)

    def finish(self, batch: Batch) -> dict[str, float]:
        """The core's batch metrics less ``actor/kl``: over the dataset's tokens, not the
        policy's samples, its k3 is no estimate of the KL to the reference (it read about
        4x the exact KL); ``dpo/reward_*`` are the log-ratios, times β, that DPO trains on."""
        metrics = super().finish(batch)
        metrics.pop("actor/kl", None)  # the update's own actor/kl is the same k3: dropped too
        return metrics

    @staticmethod
    def _training_view(batch: Batch) -> Batch:
        """The loss's reading of the policy-loss arguments (hfsdk_dpo.losses): the log-ratio
        is taken against the reference, the label is +1 on chosen and -1 on rejected rows."""
        import torch

        train = batch.select([k for k in batch.tensor_keys if k != "old_log_probs"], [])
        train["old_log_probs"] = batch["ref_log_probs"]
        label = torch.where(batch["chosen"].bool(), 1.0, -1.0)
        train["advantages"] = label[:, None] * batch["response_mask"].float()
        return train

    def replay_update(self, batch: Batch) -> dict[str, float]:
        """Step ``batch``'s update again (``hfsdk replay``): the same view of it as the step."""
        return {k: float(v) for k, v in self.actor.update_actor(self._training_view(batch)).items()}

    def generation_input(
        self, prompts: Batch, *, n: int | None = None, greedy: bool = False
    ) -> Batch:
        """What validation samples from: each pair's prompt, not its whole chosen response.

        DPO trains on given pairs and samples only to validate (with reward functions
        set). With ``data.prompt_key`` naming the chosen column (the implicit-prompt
        layout) the loader's prompt is the whole chosen response, answer included; sampling
        after it scored continuations of the answer. The prompt is cut to what the pair is
        trained after (:func:`hfsdk_dpo.pairs.context_prompts`).
        """
        from hfsdk import run_tool_schemas
        from hfsdk_datasets import resolve_use_template
        from hfsdk_dpo.pairs import context_prompts

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
        """``val/dpo/*``: implicit-reward accuracy and margin on the validation pairs.

        Validation data without pairs (prompts and reward columns only) gets none.
        """
        cfg = self.algo_config
        if not {cfg.chosen_key, cfg.rejected_key} <= set(prompts.non_tensor_keys):
            return {}
        rows = self._pairs(prompts)
        if rows.batch is None:
            return {}
        batch = self._log_probs(rows.batch)
        metrics = preference_metrics(
            batch["old_log_probs"],
            batch["ref_log_probs"],
            batch["response_mask"],
            self.config.policy_loss.beta,
            self.config.policy_loss.label_smoothing,
        )
        return {f"val/{k}": v for k, v in metrics.items()}
