"""On-policy distillation's single-controller program."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from hfsdk import REF_TOP_K, Algorithm
from hfsdk_distill.routing import route_rows, teacher_for_unrouted
from hfsdk_distill.top_k import TEACHER_TOP_K_IDS, TEACHER_TOP_K_LOG_PROBS

if TYPE_CHECKING:
    from hfsdk import Batch


class _OnRows:
    """A worker-group method applied to some rows of the batch it is handed.

    It keeps the method's ``submit``, so :meth:`Algorithm.concurrently` still
    dispatches every teacher before it waits on any.
    """

    def __init__(
        self, method: Any, rows: Sequence[int], n_rows: int, meta: dict[str, Any] | None = None
    ) -> None:
        self.method = method
        self.rows = None if list(rows) == list(range(n_rows)) else list(rows)
        self.meta = meta or {}

    def _part(self, batch: Batch) -> Batch:
        part = batch.select() if self.rows is None else batch.index(self.rows)
        part.meta.update(self.meta)
        return part

    def __call__(self, batch: Batch) -> Batch:
        return self.method(self._part(batch))

    def submit(self, batch: Batch) -> Any:
        """Dispatch the method on this object's rows without waiting."""
        return self.method.submit(self._part(batch))


def _merged(parts: Sequence[Batch], plan: dict[str, list[int]], key: str) -> Any:
    """One tensor of every row from the teachers' answers for their rows (in ``plan`` order)."""
    import torch  # here, not at import: `hfsdk list` and the planner read the spec

    rows_total = sum(len(rows) for rows in plan.values())
    first = parts[0][key]
    out = torch.zeros((rows_total, *first.shape[1:]), dtype=first.dtype)
    for rows, part in zip(plan.values(), parts, strict=True):
        out[rows] = part[key].to(out.dtype)
    return out


class DistillAlgorithm(Algorithm):
    """On-policy distillation: the student samples; per-token teacher − student log-prob is the
    advantage (optionally plus a task reward)."""

    def step(self, prompts: Batch) -> dict[str, float]:
        """Sample → student and teacher log-probs (routed by data_source) → reward → update."""
        with self.stage("generation"):
            batch = self.generate(prompts)
        cfg = self.algo_config
        teachers = self.spec.roles_of_kind("frozen_policy")
        sources = list(batch["data_source"]) if "data_source" in batch else None
        fallback = teacher_for_unrouted(cfg.default_teacher, teachers)
        plan = route_rows(sources, len(batch), cfg.teacher_routes, fallback)
        calls: list[tuple[str, Callable[[Batch], Any]]] = [
            ("old_log_prob", self.actor.compute_log_prob)
        ]
        # With top_k each teacher also ships its k most likely tokens per position.
        meta = {REF_TOP_K: cfg.top_k} if cfg.top_k else {}
        for teacher, rows in plan.items():
            method = self.role(teacher).compute_ref_log_prob
            calls.append(("ref_log_prob", _OnRows(method, rows, len(batch), meta)))
        student, *scored = self.concurrently(batch, calls)
        batch = batch.union(student)
        teacher_log_probs = _merged(scored, plan, "ref_log_probs")
        batch["teacher_log_probs"] = teacher_log_probs
        if cfg.top_k:
            batch[TEACHER_TOP_K_LOG_PROBS] = _merged(scored, plan, "ref_top_k_log_probs")
            batch[TEACHER_TOP_K_IDS] = _merged(scored, plan, "ref_top_k_ids")
        with self.stage("reward"):
            batch["token_level_scores"] = self.score(batch, "reward")
        with self.stage("advantages"):
            batch["token_level_rewards"] = batch["token_level_scores"]
            self.estimate_advantages(
                batch,
                teacher_log_probs=teacher_log_probs,
                student_log_probs=batch["old_log_probs"],
                distill_coef=cfg.distill_coef,
                reward_weight=cfg.reward_weight,
            )
            self._record_distill_metrics(batch, plan)
        with self.stage("update_actor"):
            self.record(self.actor.update_actor(batch))
        return self.finish(batch)

    def _record_distill_metrics(self, batch: Batch, plan: dict[str, list[int]]) -> None:
        """``distill/reverse_kl`` (mean per token) and both log-prob means, per teacher too."""
        from hfsdk import masked_mean

        mask = batch["response_mask"]
        teacher, student = batch["teacher_log_probs"], batch["old_log_probs"]
        self.metrics["distill/reverse_kl"] = float(masked_mean(student - teacher, mask))
        self.metrics["distill/teacher_log_prob_mean"] = float(masked_mean(teacher, mask))
        self.metrics["distill/student_log_prob_mean"] = float(masked_mean(student, mask))
        if len(plan) > 1:
            for name, rows in plan.items():
                gap = (student - teacher)[rows]
                self.metrics[f"distill/{name}/reverse_kl"] = float(masked_mean(gap, mask[rows]))
                self.metrics[f"distill/{name}/rows"] = float(len(rows))
