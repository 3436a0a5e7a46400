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

    def _plan(self, batch: Batch) -> dict[str, list[int]]:
        """Teacher → the rows it scores: every row for each weighted teacher (a mixture),
        else each row to the teacher its ``route_key`` value is routed to."""
        cfg = self.algo_config
        if cfg.teacher_weights:
            return {name: list(range(len(batch))) for name in cfg.teacher_weights}
        sources = list(batch[cfg.route_key]) if cfg.route_key in batch else None
        if cfg.teachers:
            # Config-named teachers: a source none of them is named for is refused (unless
            # default_teacher names one), never silently scored by another domain's teacher.
            fallback = cfg.default_teacher or None
            return route_rows(
                sources, len(batch), cfg.teachers, fallback,
                setting="teachers", column=cfg.route_key, columns=batch.non_tensor_keys,
            )  # fmt: skip
        teachers = self.spec.roles_of_kind("frozen_policy")
        fallback = teacher_for_unrouted(cfg.default_teacher, teachers)
        return route_rows(
            sources, len(batch), cfg.teacher_routes, fallback,
            column=cfg.route_key, columns=batch.non_tensor_keys,
        )  # fmt: skip

    def step(self, prompts: Batch) -> dict[str, float]:
        """Sample → student and teacher log-probs (routed, or a weighted mixture) → reward →
        update."""
        with self.stage("generation"):
            batch = self.generate(prompts)
        cfg = self.algo_config
        plan = self._plan(batch)
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
        if cfg.teacher_weights:
            teacher_log_probs = mixture_log_probs(
                [part["ref_log_probs"] for part in scored], list(cfg.teacher_weights.values())
            )
            self._record_teacher_gaps(batch, dict(zip(plan, scored, strict=True)))
        else:
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
        if len(plan) > 1 and not self.algo_config.teacher_weights:
            for name, rows in plan.items():
                gap = (student - teacher)[rows]
                self.metrics[f"distill/{name}/reverse_kl"] = float(masked_mean(gap, mask[rows]))
                self.metrics[f"distill/{name}/rows"] = float(len(rows))

    def _record_teacher_gaps(self, batch: Batch, parts: dict[str, Batch]) -> None:
        """Each mixed teacher's own ``distill/<teacher>/reverse_kl`` over every row."""
        from hfsdk import masked_mean

        mask = batch["response_mask"]
        student = batch["old_log_probs"]
        for name, part in parts.items():
            gap = student - part["ref_log_probs"].to(student.dtype)
            self.metrics[f"distill/{name}/reverse_kl"] = float(masked_mean(gap, mask))


def mixture_log_probs(parts: Sequence[Any], weights: Sequence[float]) -> Any:
    """``log Σ_i w_i·p_i(y)`` per token: the log-prob of the teachers' weighted mixture
    (weights normalised to sum to one); 0 where every teacher's log-prob is 0 (masked)."""
    import math

    import torch

    total = float(sum(weights))
    stacked = torch.stack([part.float() for part in parts])
    log_w = torch.tensor([math.log(w / total) for w in weights]).view(-1, *[1] * parts[0].dim())
    return torch.logsumexp(stacked + log_w, dim=0)
