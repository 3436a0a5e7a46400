"""DAPO's single-controller program: GRPO's step with dynamic sampling and overlong shaping."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hfsdk import Algorithm, last_segments
from hfsdk_dapo.dynamic_sampling import informative_groups, rows_of

OVERLONG_COLUMN = "overlong_penalty"
"""A round's per-row overlong penalty, until the step's trained rows are known."""

if TYPE_CHECKING:
    from hfsdk import AdvantageResult, Batch
    from hfsdk_dapo.dapo_config import DAPOConfig


class DAPOAlgorithm(Algorithm):
    """Sample → score (+ overlong shaping) → keep informative groups, draw more → log-probs →
    group advantages → actor update (token-mean, clip-higher, no KL)."""

    algo_config: DAPOConfig
    _kept_none: bool = False
    """Whether this step's dynamic sampling kept no group in any round."""

    def step(self, prompts: Batch) -> dict[str, float]:
        """One DAPO iteration on ``prompts`` (and whatever dynamic sampling draws more)."""
        batch = self._sample_informative(prompts)
        # Each round's scoring set reward/mean to that whole round's; report the trained rows'.
        self.metrics["reward/mean"] = float(last_segments(batch)["accuracy"].float().mean())
        if self.needs_old_log_probs(len(batch)):
            (old,) = self.concurrently(batch, [("old_log_prob", self.actor.compute_log_prob)])
            batch = batch.union(old)
        with self.stage("advantages"):
            batch["token_level_rewards"] = self.rewards_with_kl(batch)
            self.estimate_advantages(batch)
        with self.stage("update_actor"):
            self.record(self.actor.update_actor(batch))
        return self.finish(batch)

    def estimate_advantages(self, batch: Batch, **inputs: Any) -> AdvantageResult:
        """The estimator's advantages, or zeros when dynamic sampling kept no group.

        The filter rejected every group, and that holds: equally correct answers still
        differ in shaped score by their length (overlong shaping), which the group
        normalisation would scale to full-size advantages. With them zero, only the loss's
        other terms (a KL or entropy term), if any, act on this step.
        """
        result = super().estimate_advantages(batch, **inputs)
        if not self._kept_none:
            return result
        import attrs
        import torch  # here: registering the algorithm must not import torch

        zeros = torch.zeros_like(result.advantages)
        batch["advantages"], batch["returns"] = zeros, torch.zeros_like(result.returns)
        return attrs.evolve(result, advantages=zeros, returns=batch["returns"])

    def _scored(self, prompts: Batch, round_index: int, behaviour: bool = False) -> Batch:
        """Rollouts of ``prompts`` with their (shaped) token-level scores and ``accuracy``."""
        from hfsdk_dapo.padding import left_pad_rollout

        with self.stage("generation"):
            # The prompts exactly as drawn: a batch the pipeline generated ahead is known by
            # them (padding them first would make a new batch and regenerate it here).
            batch = self.generate(prompts)
        # Every round's rollouts concatenate: one prompt width for all.
        batch = left_pad_rollout(batch, self.config.rollout.max_prompt_length)
        # Group ids unique within the step: a prompt drawn again after an epoch wraps
        # is a group of its own.
        batch["uid"] = [f"{round_index}:{u}" for u in batch["uid"]]
        if round_index > 0:
            batch = self._with_behaviour_log_probs(batch, behaviour)
        with self.stage("reward"):
            scores = self.score(batch, "reward")
            _check_finite(scores, batch["uid"])
            # What the groups are filtered on: the reward's own score (accuracy for a
            # verifiable reward), before overlong shaping makes equal answers differ.
            batch["accuracy"] = scores.sum(-1)
            penalty = self._overlong_penalty(batch)
            if penalty is not None:
                scores = scores + penalty
                # Per row, carried through the rounds' filter and concatenation, so the
                # metric is taken over the rows trained (see _record_overlong).
                batch[OVERLONG_COLUMN] = penalty.sum(-1)
            batch["token_level_scores"] = scores
        return batch

    def _with_behaviour_log_probs(self, batch: Batch, needed: bool) -> Batch:
        """A later round's rollout with ``rollout_log_probs`` when the run needs them.

        Later rounds generate now, with the weights being trained, so their behaviour
        policy is the current one: its log-probs are the actor's own. Rounds must carry the
        same columns to concatenate, and a rollout correction needs them on every row.
        """
        if "rollout_log_probs" in batch or not needed:
            return batch
        (own,) = self.concurrently(batch, [("old_log_prob", self.actor.compute_log_prob)])
        batch["rollout_log_probs"] = own["old_log_probs"]
        return batch

    def _overlong_penalty(self, batch: Batch) -> Any:
        """DAPO's soft overlong penalty as token-level scores (B, R), or ``None`` when off.

        The length is the whole response (model and tool tokens of a multi-turn
        trajectory), against the responses' budget (``rollout.multi_turn.max_response_tokens``
        for multi-turn rollouts, else ``rollout.max_response_length``); the penalty sits
        where the score does, on the last token of the loss mask (a model token).
        """
        import torch  # here: registering the algorithm must not import torch

        from hfsdk_dapo.overlong import overlong_penalty

        cfg = self.algo_config
        if not cfg.overlong_buffer_len:
            return None
        budget = self.config.rollout.response_width()
        mask = batch["response_mask"]
        width = mask.shape[-1]
        lengths = batch["attention_mask"][:, -width:].sum(-1)
        penalty = overlong_penalty(
            lengths, budget, cfg.overlong_buffer_len, cfg.overlong_penalty_factor
        )
        positions = torch.arange(width).expand_as(mask)
        last = torch.where(mask.bool(), positions, torch.zeros_like(positions)).max(-1).values
        out = torch.zeros(mask.shape, dtype=torch.float32)
        out[torch.arange(len(batch)), last] = penalty.to(torch.float32)
        return out

    def _record_overlong(self, batch: Batch) -> Batch:
        """``batch`` with ``overlong/penalty_mean`` taken over its rows, as ``reward/mean``
        is (one row per trajectory); the per-row penalty column is dropped, so it does not
        reach the update or the rollout dump."""
        if OVERLONG_COLUMN in batch:
            penalty = last_segments(batch)[OVERLONG_COLUMN]
            self.metrics["overlong/penalty_mean"] = float(penalty.mean())
            del batch[OVERLONG_COLUMN]
        return batch

    def _sample_informative(self, prompts: Batch) -> Batch:
        """The step's batch: only groups that disagree, refilled from the prompt stream."""
        cfg = self.algo_config
        target = len(prompts)
        batch = self._scored(prompts, 0)
        # Later rounds carry rollout_log_probs when the first did (a rollout pool or the
        # pipeline reports them) or the run needs them (a correction, the mismatch gate).
        from hfsdk import behaviour_log_probs_needed

        behaviour = "rollout_log_probs" in batch or behaviour_log_probs_needed(self.config)
        # A partial rollout's per-token versions: later rounds are tagged too (generated now,
        # with the current version), and the metrics are taken again over the trained rows.
        tagged = self._token_versions_pipeline(batch)
        # The policy's reward on the prompts as drawn (reward/mean is the kept groups'), as
        # reward/mean counts it: the reward's own score, without the overlong penalty.
        first = last_segments(batch)["accuracy"].float()
        self.metrics["dynamic_sampling/reward_before_filter"] = float(first.mean())
        stats: dict[str, Any] = {"drawn": target, "dropped": 0, "rounds": 1}
        self._kept_none = False
        if not cfg.dynamic_sampling:
            self._record_sampling(stats, target, target)
            return self._record_overlong(batch)
        kept: list[Batch] = []
        groups = first_rows = 0
        while True:
            with self.stage("dynamic_sampling"):
                ids = list(batch["uid"])
                # On accuracy, as the paper and verl do: four correct answers of different
                # lengths differ in shaped score but carry no signal between them.
                keep = informative_groups(ids, batch["accuracy"].tolist())
                stats["dropped"] += len(set(ids)) - len(keep)
                keep = keep[: target - groups]
                if keep:
                    kept.append(batch.index(rows_of(ids, keep)))
                    groups += len(keep)
                    first_rows = first_rows or (len(kept[-1]) if stats["rounds"] == 1 else 0)
            if groups >= target or stats["rounds"] >= cfg.max_generation_rounds:
                break
            more = self.prompts.next_batch(len(prompts))
            stats["drawn"] += len(more)
            batch = self._scored(more, stats["rounds"], behaviour)
            if tagged is not None:
                batch["token_versions"] = _fresh_versions(batch, tagged.version)
            stats["rounds"] += 1
        self._record_sampling(stats, groups, target)
        # No group disagreed in any round: the last one is trained on, with its advantages
        # zero (shaped scores may still differ by length: see estimate_advantages).
        self._kept_none = not kept
        final = _concat_rounds(kept) if kept else batch
        if tagged is not None:  # per token, over the rows trained (dropped groups left out)
            self.record(tagged.token_staleness_metrics(final))
        elif stats["rounds"] > 1:  # with nothing kept the last round, fresh, is trained on
            self._restale(first_rows / sum(len(k) for k in kept) if kept else 0.0)
        return self._record_overlong(final)

    def _token_versions_pipeline(self, batch: Batch) -> Any:
        """The pipeline that generated ``batch`` when it carries per-token versions (partial
        rollouts: ``token_versions``) and can take their staleness metrics, else ``None``."""
        pipeline = self.context.pipeline
        if "token_versions" not in batch or not hasattr(pipeline, "token_staleness_metrics"):
            return None
        return pipeline

    def _restale(self, share: float) -> None:
        """The pipeline's staleness metrics over the kept rows: only the first round's
        ``share`` came through the pipeline; later rounds generated now, at staleness 0
        (they were reported at the first round's staleness). For a first round of one
        weight version per batch; one with ``token_versions`` is measured per token."""
        if "async/staleness_mean" not in self.metrics:
            return  # no pipeline (trainer.pipeline: sync): nothing was stale
        self.metrics["async/staleness_mean"] *= share
        if not share:
            self.metrics["async/staleness_max"] = 0.0
        hist = [k for k in self.metrics if k.startswith("async/staleness_hist_")]
        for key in hist:
            fresh = (1.0 - share) if key == "async/staleness_hist_0" else 0.0
            self.metrics[key] = self.metrics[key] * share + fresh

    def _record_sampling(self, stats: dict[str, Any], groups: int, target: int) -> None:
        self.metrics["dynamic_sampling/prompts_drawn"] = float(stats["drawn"])
        self.metrics["dynamic_sampling/groups_dropped"] = float(stats["dropped"])
        self.metrics["dynamic_sampling/generation_rounds"] = float(stats["rounds"])
        self.metrics["dynamic_sampling/groups_kept"] = float(groups)
        self.metrics["dynamic_sampling/batch_filled"] = groups / target


def _fresh_versions(batch: Batch, version: int) -> Any:
    """``token_versions`` of a round generated now: every token at the current ``version``."""
    import torch

    return torch.full(batch["response_mask"].shape, float(version))


def _concat_rounds(rounds: list[Batch]) -> Batch:
    """The kept rows of every round as one batch, with the columns all rounds have.

    A batch the pipeline generated ahead may carry columns a round generated now does
    not; ``rollout_log_probs`` is made present on every round beforehand, and so is a
    partial rollout's ``token_versions`` (later rounds at the current version).
    """
    from hfsdk import Batch

    if len(rounds) == 1:
        return rounds[0]
    tensors = [k for k in rounds[0].tensor_keys if all(k in r.tensor_keys for r in rounds)]
    arrays = [k for k in rounds[0].non_tensor_keys if all(k in r.non_tensor_keys for r in rounds)]
    _check_widths(rounds, tensors)
    return Batch.concat([r.select(tensor_keys=tensors, non_tensor_keys=arrays) for r in rounds])


def _check_finite(scores: Any, uids: Any) -> None:
    """Refuse rows scored NaN or infinite (a reward model can give them; reward functions
    refuse theirs): the group filter would keep a NaN group (NaN differs from every score,
    itself included) and the group statistics would give it zero advantages, silently."""
    import torch  # here: registering the algorithm must not import torch

    from hfsdk import HfsdkError

    bad = (~torch.isfinite(scores)).any(-1).nonzero().flatten().tolist()
    if bad:
        row = bad[0]
        # uid is "<generation round>:<prompt uid>" (set in _scored): name the prompt's.
        uid = str(uids[row]).split(":", 1)[-1]
        raise HfsdkError(
            f"{len(bad)} of {len(scores)} rows were scored non-finite (NaN or inf) by the "
            f"reward (first: row {row}, uid {uid!r}); DAPO needs a finite score per sample "
            "to filter and normalise groups: check the reward model or reward signal that "
            "produced it (its inputs, dtype overflow, a divergent checkpoint)"
        )


def _check_widths(rounds: list[Batch], keys: list[str]) -> None:
    """One line when rounds cannot be joined: the prompt columns are left-padded to one width
    (:func:`~hfsdk_dapo.padding.left_pad_rollout`), so a column whose per-row shape still
    differs is a per-row model input padded to its own round (images a tool drew; image
    prompts are refused before the run), which dynamic sampling cannot join."""
    from hfsdk import HfsdkError

    for key in keys:
        shapes = {tuple(r[key].shape[1:]) for r in rounds}
        if len(shapes) > 1:
            raise HfsdkError(
                f"dynamic sampling cannot join this step's generation rounds: their {key!r} "
                f"columns have different per-row shapes {sorted(shapes)} (images of different "
                "sizes or counts); set algorithm.dynamic_sampling=false"
            )
