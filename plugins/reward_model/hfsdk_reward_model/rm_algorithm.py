"""The reward-model trainer's single-controller program."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hfsdk import Algorithm

if TYPE_CHECKING:
    from hfsdk import Batch
    from hfsdk_reward_model.loss import BradleyTerryLoss
    from hfsdk_supervised_data import PairColumns


def objective_from(algorithm_config: Any) -> BradleyTerryLoss:
    """The spec's ``score_objective``: Bradley-Terry with the configured margin, centring."""
    from hfsdk_reward_model.loss import BradleyTerryLoss  # torch: not at the spec's import

    return BradleyTerryLoss(
        margin=algorithm_config.margin,
        center_coef=algorithm_config.center_coef,
        higher=algorithm_config.higher,
    )


def pair_columns(algorithm_config: Any, prompt_key: str) -> PairColumns:
    """The pair's columns. Data without a prompt column (``data.prompt_key`` names a response
    column so the loader can read it) has none: the prompt is what both responses begin with."""
    from hfsdk_supervised_data import PairColumns

    cfg = algorithm_config
    return PairColumns.read_by(prompt_key, cfg.chosen_key, cfg.rejected_key, tools=cfg.tools_key)


class RewardModelAlgorithm(Algorithm):
    """Reward/cost model: Bradley-Terry on preference pairs, scored at the last token."""

    @property
    def model(self) -> Any:
        """The worker group of the trained scorer (the spec's ``score_model`` role)."""
        return self.role(self.spec.main_role)

    def pairs(self, rows: Batch, label: str = "row") -> Batch:
        """The rows' preference pairs, tokenized and interleaved (chosen, rejected, ...);
        ``label`` names the rows in errors."""
        return self._collate(self._tokenized(rows, label))

    def _tokenized(self, rows: Batch, label: str, allow_empty: bool = False) -> list[Any]:
        # Here, not at import: these pull in torch, and `hfsdk list` reads the spec.
        from hfsdk_datasets import resolve_use_template
        from hfsdk_supervised_data import tokenize_preference_pairs

        keys = rows.non_tensor_keys
        tokenizer = self.tokenizer
        return tokenize_preference_pairs(
            [{k: rows[k][i] for k in keys} for i in range(len(rows))],
            tokenizer,
            use_template=resolve_use_template(tokenizer, self.config.data.apply_chat_template),
            columns=pair_columns(self.algo_config, self.config.data.prompt_key),
            max_length=self.algo_config.max_length,
            label=label,
            allow_empty=allow_empty,
        )

    def _collate(self, tokenized: list[Any]) -> Batch:
        from hfsdk import ROW_GROUP
        from hfsdk_supervised_data import collate_preference_pairs

        batch = collate_preference_pairs(tokenized, self.tokenizer.pad_token_id)
        batch.meta[ROW_GROUP] = 2  # a pair's two rows share every pass
        return batch

    def _step_pairs(self, prompts: Batch) -> Batch:
        """The step's pairs. Rows whose pairs are all longer than ``algorithm.max_length``
        are replaced by the stream's next ones (:func:`draw_step_rows`)."""
        from hfsdk_supervised_data.step_draws import draw_step_rows

        stream = self.prompts.next_batch if self.context.prompts is not None else None
        draws = draw_step_rows(
            lambda rows: (rows, self._tokenized(rows, "row", allow_empty=stream is not None)),
            prompts,
            lambda drawn: bool(drawn[1]),
            stream,
        )
        rows, tokenized = draws[-1]
        return self._collate(tokenized or self._tokenized(rows, "row"))  # (that raises)

    def step(self, prompts: Batch) -> dict[str, float]:
        """Tokenize the step's pairs, then one Bradley-Terry update of the scorer."""
        with self.stage("pairs"):
            batch = self._step_pairs(prompts)
        with self.stage("update_score_model"):
            self.record(self.model.update_score_model(batch))
        self.metrics["pairs/count"] = float(len(batch) // 2)
        return self.finish(batch)

    def validation_metrics(self, prompts: Batch) -> dict[str, float]:
        """``val/pairwise_accuracy``, ``val/margin_mean`` and both score means on held-out pairs."""
        batch = self.pairs(prompts, label="validation row")
        from hfsdk_reward_model.loss import pair_metrics

        scores = self.model.compute_scores(batch)["rm_scores"]
        found = pair_metrics(scores, self.algo_config.higher)
        return {f"val/{name}": value for name, value in found.items()}
