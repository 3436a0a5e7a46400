"""Base types for algorithm plugins.

An algorithm is a short single-controller program over worker groups. Its
maths (advantage estimators, losses, KL estimators) are looked up by name in
the registries so any algorithm can select any of them.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

import attrs

from hfsdk.core.config.help import help_field
from hfsdk.core.errors import HfsdkError
from hfsdk.core.maths.aggregation import LOSS_AGG_MODES, LossAggMode
from hfsdk.core.role_config import RoleConfig
from hfsdk.core.segments import broadcast_advantages, last_segments, trajectory_rows

if TYPE_CHECKING:
    import torch

    from hfsdk.core.algorithm_spec import AlgorithmSpec
    from hfsdk.core.batch import Batch
    from hfsdk.core.maths.protocols import AdvantageResult, KLEstimator
    from hfsdk.core.registry import RegistryEntry
    from hfsdk.core.workers.futures import CallClock


@attrs.frozen(kw_only=True)
class TrainerAlgorithmConfig:
    """The ``algorithm`` section of an algorithm that trains no policy (a reward or cost
    model on preference pairs): none of the RL settings of :class:`AlgorithmConfig`.

    A spec whose ``config_cls`` subclasses only this gets no ``policy_loss``,
    ``advantage`` or ``value_loss`` section and no KL controller (its program
    has no KL to control); one that samples or updates a policy uses
    :class:`AlgorithmConfig`.
    """


@attrs.frozen(kw_only=True)
class AlgorithmConfig(TrainerAlgorithmConfig):
    """Settings every algorithm shares; algorithm plugins subclass it.

    Names (``advantage_estimator``, ``policy_loss``, ``kl_estimator``) are looked
    up in the registries, so any installed estimator or loss can be selected.
    """

    advantage_estimator: str = help_field(
        "Registered advantage estimator (hfsdk list advantage-estimators); its settings are "
        "the 'advantage' section."
    )  # no core default: each algorithm names its estimator
    policy_loss: str = help_field(
        "Registered policy loss (hfsdk list policy-losses); its settings are the 'policy_loss'"
        " section.",
        default="ppo_clip",
    )
    kl_estimator: str = help_field(
        "Per-token KL estimator to the reference: k1 (log-ratio), abs, k2, k3 (Schulman's "
        "unbiased low-variance), k3_clamped.",
        default="k1",
    )
    kl_in_reward: bool = help_field(
        "Subtract kl_coef·KL from the token rewards (PPO/InstructGPT style) instead of adding "
        "KL to the actor loss.",
        default=False,
    )
    kl_coef: float = help_field(
        "Coefficient of the KL penalty in the reward (initial value for the adaptive "
        "controller); 0 turns it off.",
        default=0.0,
        validator=attrs.validators.ge(0.0),
    )
    kl_controller: Literal["fixed", "adaptive"] = help_field(
        "fixed: kl_coef stays; adaptive: kl_coef follows target_kl (Ziegler et al., 2019).",
        default="fixed",
        validator=attrs.validators.in_(("fixed", "adaptive")),
    )
    target_kl: float = help_field(
        "Adaptive KL controller: the KL the coefficient steers towards, in nats per token (the"
        " batch mean of each sequence's token-mean KL, as verl and OpenRLHF measure it).",
        default=0.1,
        validator=attrs.validators.gt(0.0),
    )
    kl_horizon: int = help_field(
        "Adaptive KL controller: horizon in samples over which the coefficient adapts.",
        default=10000,
        validator=attrs.validators.gt(0),
    )
    kl_loss_coef: float = help_field(
        "Coefficient of KL(π‖π_ref) added to the actor loss when KL is not in the reward (GRPO"
        " style); 0 turns it off.",
        default=0.0,
        validator=attrs.validators.ge(0.0),
    )
    entropy_coef: float = help_field(
        "Coefficient of the entropy bonus subtracted from the actor loss; 0 turns it off.",
        default=0.0,
        validator=attrs.validators.ge(0.0),
    )
    loss_agg_mode: LossAggMode = help_field(
        "How per-token losses become one number: token-mean, seq-mean-token-sum, seq-mean-"
        "token-mean, seq-mean-token-sum-norm (Dr.GRPO).",
        default="token-mean",
        validator=attrs.validators.in_(LOSS_AGG_MODES),
    )
    n_samples_per_prompt: int = help_field(
        "Responses sampled per prompt each step (the group size of group-relative estimators).",
        default=1,
        validator=attrs.validators.ge(1),
    )
    is_correction: Literal["none", "tis", "mis"] = help_field(
        "Off-policy correction of the policy loss by the ratio π_old/π_rollout of the "
        "rollout's own log-probs (rollout_log_probs): none, tis (truncated IS: min(ρ, is_cap)) "
        "or mis (masked IS: tokens with ρ > is_cap drop out); see docs/async.md.",
        default="none",
        validator=attrs.validators.in_(("none", "tis", "mis")),
    )
    is_level: Literal["token", "sequence"] = help_field(
        "The IS ratio per token, or per sequence (the product over its tokens, for every "
        "token of it).",
        default="token",
        validator=attrs.validators.in_(("token", "sequence")),
    )
    is_cap: float = help_field(
        "The IS cap: tis truncates ρ at it, mis masks where ρ exceeds it.",
        default=2.0,
        validator=attrs.validators.gt(0.0),
    )


Scorer = Callable[["Batch"], tuple["torch.Tensor", dict[str, float]]]
"""Scores a generated batch: one float per sample (B,) plus metrics to log."""


class PromptSource(Protocol):
    """The run's stream of training prompts, as an algorithm sees it."""

    def next_batch(self, n: int | None = None) -> Batch:
        """The next ``n`` prompts (default: ``data.batch_size``), left-padded, as a batch.

        The trainer checkpoints the stream's position after every step, so
        prompts drawn within ``step()`` are part of an exact resume.
        """


class GenerationSource(PromptSource, Protocol):
    """What stands between the trainer and its prompt stream when generation runs ahead
    (``hfsdk_build_generation_pipeline``) or was recorded (``hfsdk_recorded_generations``)."""

    def generated(self, prompts: Batch) -> tuple[Batch, dict[str, float]] | None:
        """The batch generated for ``prompts`` (this step's draw) and its metrics, else ``None``."""

    def step_done(self) -> None:
        """The step's update is done (later generations sample with the newer weights)."""

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps of it (the trainer's ``pipeline`` entry)."""

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` on resume."""


def _new_clock() -> CallClock:
    from hfsdk.core.workers.futures import CallClock

    return CallClock()


@attrs.define(kw_only=True)
class AlgorithmContext:
    """What the trainer hands an algorithm: its config, its roles, signals and prompts.

    ``roles`` maps each model role (``actor``, ``critic``, ``reference``, ...) to
    the worker-group handle whose methods run on that role's workers;
    ``signals`` maps each ``scorer`` role (``reward``, ``cost``) to a scorer;
    ``spec`` is the algorithm's registered :class:`~hfsdk.core.algorithm_spec.AlgorithmSpec`;
    ``prompts`` is the training prompt stream the trainer draws each step's
    batch from (:class:`PromptSource`; ``None`` where a caller runs ``step()``
    on batches of its own), so a program may draw more within a step (e.g.
    DAPO's dynamic sampling refilling a batch) without a trainer change.
    """

    config: Any
    roles: Mapping[str, Any]
    signals: Mapping[str, Scorer]
    spec: AlgorithmSpec
    prompts: PromptSource | None = None
    pipeline: GenerationSource | None = None
    """The generation pipeline of a ``trainer.pipeline`` other than ``sync`` or of a rollout
    pool (``hfsdk_build_generation_pipeline``; ``None``: each step generates from the weights
    it trains)."""
    tokenizer: Any = None
    """The run's tokenizer (the policy's), for programs that tokenize given responses on the
    controller (SFT targets, preference pairs); ``None`` where a caller builds no run."""
    clock: CallClock = attrs.field(factory=lambda: _new_clock())
    """The session's clock of blocking worker calls (the trainer's controller-overhead metrics)."""


class Algorithm:
    """Base class of an algorithm's single-controller program.

    Roles, their kinds and the placement search's stages are stated once, in the
    :class:`~hfsdk.core.algorithm_spec.AlgorithmSpec` the plugin registers.
    Subclasses implement :meth:`step` as a short program of worker-group calls,
    using the building blocks below (generation, scoring, KL-in-reward, the
    selected advantage estimator, stage timing). Nothing algorithm-specific
    lives in the trainer loop.
    """

    TRAINER_TIMINGS: ClassVar[frozenset[str]] = frozenset({"data", "validation", "checkpoint"})
    """Stages the trainer loop times around ``step()`` (not part of the spec)."""

    def __init__(self, context: AlgorithmContext) -> None:
        self.context = context
        self.spec = context.spec
        self._timings = self.spec.timings | self.TRAINER_TIMINGS
        self.config = context.config
        self.algo_config = context.config.algorithm
        self.metrics: dict[str, float] = {}
        self.last_batch: Batch | None = None
        """The last finished step's batch (``finish``), for ``trainer.rollout_dump``."""
        self.generations: list[tuple[Batch, Batch]] = []
        """This step's sampled generations, ``(prompts, generated)`` in order (the trainer
        dumps and clears them): what ``trainer.mode: train_only`` trains from."""
        from hfsdk.core.maths.kl import build_kl_controller

        cfg = self.algo_config
        if isinstance(cfg, AlgorithmConfig):
            self.kl_controller = build_kl_controller(
                cfg.kl_controller, cfg.kl_coef, cfg.target_kl, cfg.kl_horizon
            )
        else:  # no policy, no KL: a fixed 0 keeps checkpoints of every program alike
            self.kl_controller = build_kl_controller("fixed", 0.0)

    @functools.cached_property
    def _advantage_estimator(self) -> RegistryEntry:
        """``algorithm.advantage_estimator``'s registry entry, looked up once per run."""
        from hfsdk.core.plugin_manager import get_registry

        return get_registry("advantage_estimators")[self.algo_config.advantage_estimator]

    @functools.cached_property
    def _kl_estimator(self) -> KLEstimator:
        """``algorithm.kl_estimator`` resolved once per run (a callable or a registered name)."""
        from hfsdk.core.maths.kl import resolve_kl_estimator

        return resolve_kl_estimator(self.algo_config.kl_estimator)

    def role(self, name: str) -> Any:
        """The worker-group handle of role ``name``."""
        return self.context.roles[name]

    @property
    def prompts(self) -> PromptSource:
        """The run's prompt stream: ``self.prompts.next_batch(n)`` draws ``n`` more prompts.

        Draws advance the same data position the trainer checkpoints, so a run
        that draws within ``step()`` still resumes exactly. Time them under a
        declared stage (``data``, or a name in the spec's ``extra_stages``).
        """
        if self.context.prompts is None:
            raise HfsdkError(
                f"algorithm {self.spec.name!r} draws prompts, but its AlgorithmContext has no "
                "prompt source; pass prompts=<a PromptSource, e.g. the session's loader> "
                "when building the context outside the trainer"
            )
        return self.context.prompts

    @property
    def tokenizer(self) -> Any:
        """The run's tokenizer (``AlgorithmContext.tokenizer``); an error when none was given."""
        if self.context.tokenizer is None:
            raise HfsdkError(
                f"algorithm {self.spec.name!r} tokenizes on the controller, but its "
                "AlgorithmContext has no tokenizer; pass tokenizer=<the run's tokenizer> when "
                "building the context outside the trainer"
            )
        return self.context.tokenizer

    # -- the program ---------------------------------------------------------------

    def step(self, prompts: Batch) -> dict[str, float]:
        """Run one training iteration on a batch of prompts and return its metrics."""
        raise NotImplementedError(f"{type(self).__name__} does not implement step()")

    def validation_metrics(self, prompts: Batch) -> dict[str, float]:
        """Metrics of the program's own on the validation rows, beside the sampled reward.

        The trainer calls it at every validation with the whole validation set
        (every dataset column included) and logs the result with the ``val/``
        metrics; the default adds nothing. SFT reports its validation loss here.
        """
        del prompts
        return {}

    # -- building blocks -----------------------------------------------------------

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time a stage; recorded as ``timing/<name>_s``.

        ``name`` must be one the spec's dataflow declares (so the placement search's
        stages and the program's timings cannot drift apart).
        """
        self._check_stage(name)
        start = time.perf_counter()
        try:
            yield
        finally:
            key = f"timing/{name}_s"
            self.metrics[key] = self.metrics.get(key, 0.0) + time.perf_counter() - start

    def _check_stage(self, name: str) -> None:
        if name not in self._timings:
            raise HfsdkError(
                f"algorithm {self.spec.name!r} times stage {name!r}, which its spec does not "
                f"declare; declared: {', '.join(sorted(self._timings))} (add it to the "
                "AlgorithmSpec, e.g. extra_generations, or use a declared name)"
            )

    def concurrently(
        self, batch: Batch, calls: Sequence[tuple[str, Callable[[Batch], Any]]]
    ) -> list[Any]:
        """Run independent stages side by side on ``batch``; their results, in ``calls`` order.

        ``calls`` pairs a declared stage name with a worker-group method (e.g.
        ``("ref_log_prob", reference.compute_ref_log_prob)``). Every worker-group
        call is dispatched before any is waited on, so stages whose roles sit on
        different pools overlap (roles sharing devices still run one after the
        other on them); a callable without ``submit`` runs on the controller in
        the meantime. Each stage's ``timing/<name>_s`` runs from the dispatch to
        its result (a name listed twice: to the later one), so overlapping
        stages' timings add up to more than the step's wall time.
        """
        for name, _ in calls:
            self._check_stage(name)
        started = time.perf_counter()
        pending = [
            (name, method.submit(batch) if hasattr(method, "submit") else None, method)
            for name, method in calls
        ]
        results, busy, elapsed = [], 0.0, {}
        for name, future, method in pending:
            if future is None:
                results.append(method(batch))
            else:
                results.append(future.result())
                busy = max(busy, future.busy_s())
            # A name listed twice (two critics' values) ends with its later call.
            elapsed[name] = time.perf_counter() - started
        for name, seconds in elapsed.items():
            key = f"timing/{name}_s"
            self.metrics[key] = self.metrics.get(key, 0.0) + seconds
        if any(future is not None for _, future, _ in pending):
            # One entry for the group: the controller waited its wall time, workers were busy
            # for the slowest call (overlapping calls' busy times do not add up).
            self.context.clock.record(time.perf_counter() - started, busy)
        return results

    def record(self, metrics: Mapping[str, float], prefix: str = "") -> None:
        """Add worker or maths metrics under ``prefix``."""
        for key, value in metrics.items():
            self.metrics[f"{prefix}{key}"] = float(value)

    def generation_input(
        self, prompts: Batch, *, n: int | None = None, greedy: bool = False
    ) -> Batch:
        """What :meth:`generate` hands the actor's rollout: each prompt repeated ``n`` times."""
        n = self.algo_config.n_samples_per_prompt if n is None else n
        batch = prompts.repeat(n, interleave=True) if n > 1 else prompts
        # Repeated here, so every rank gets whole rows; the rollout must not repeat again.
        batch.meta.update(greedy=greedy, n=1)
        return batch

    def generate(self, prompts: Batch, *, n: int | None = None, greedy: bool = False) -> Batch:
        """Sample ``n`` responses per prompt with the actor (``n`` defaults to the config's).

        Under a ``trainer.pipeline`` other than ``sync`` the step's sampled batch was
        generated ahead (:class:`GenerationSource`); it is returned with its
        staleness metrics. Other generations (greedy, another ``n``) run now. A rollout
        that returns several segments per trajectory gets them numbered
        (:func:`hfsdk.core.segments.number_trajectories`).
        """
        from hfsdk.core.segments import number_trajectories

        pipeline = self.context.pipeline
        if pipeline is not None and n is None and not greedy:
            ahead = pipeline.generated(prompts)
            if ahead is not None:
                out, staleness = ahead
                number_trajectories(out)
                self.record(staleness)
                self.record(out.meta.pop("rollout_metrics", None) or {})
                self.generations.append((prompts, out))
                return out
        batch = self.generation_input(prompts, n=n, greedy=greedy)
        out = number_trajectories(self.actor.generate_sequences(batch))
        # The rollout's train -> generate transition (timing/reshard_s, perf/reshard_bytes, ...).
        self.record(out.meta.pop("rollout_metrics", None) or {})
        if n is None and not greedy:
            self.generations.append((prompts, out))
        return out

    @property
    def actor(self) -> Any:
        """The worker group of the spec's ``policy`` role."""
        return self.role(self.spec.policy_role)

    def needs_old_log_probs(self, samples: int) -> bool:
        """Whether the rollout must compute the sampling policy's log-probs separately.

        Always with a KL penalty in the reward or ``trainer.max_mismatch_kl`` (they read
        them); otherwise only when the actor's config says an update of ``samples`` is not
        one epoch of one mini-batch (:meth:`hfsdk.RoleConfig.updates_in_one_pass`). Without
        them the update computes them itself where it must (a model with dropout) and
        reports ``rollout/log_prob_diff_*``, so stale rollout weights still show
        (docs/backends.md).
        """
        if self.algo_config.kl_in_reward:
            return True
        trainer = getattr(self.config, "trainer", None)
        if getattr(trainer, "max_mismatch_kl", None) is not None:
            return True  # the gate reads mismatch/kl_k3, which needs π_old on the controller
        actor = self.config.sections.get(self.spec.policy_role)
        return not (isinstance(actor, RoleConfig) and actor.updates_in_one_pass(samples))

    def rollout(
        self, prompts: Batch, also: Sequence[tuple[str, Callable[[Batch], Any]]] = ()
    ) -> Batch:
        """The opening every algorithm shares: sample, then old and reference log-probs.

        The old log-probs are skipped when :meth:`needs_old_log_probs` says the
        update is exactly on-policy. They, the reference log-probs and the
        ``also`` stages (e.g. ``("values", critic.compute_values)``), which all
        read only the generated batch, run :meth:`concurrently`; their results
        join the batch.
        """
        with self.stage("generation"):
            batch = self.generate(prompts)
        calls: list[tuple[str, Callable[[Batch], Any]]] = []
        if self.needs_old_log_probs(len(batch)):
            calls.append(("old_log_prob", self.actor.compute_log_prob))
        for reference in self.spec.roles_of_kind("frozen_policy"):
            calls.append(("ref_log_prob", self.role(reference).compute_ref_log_prob))
        for part in self.concurrently(batch, [*calls, *also]):
            batch = batch.union(part)
        return batch

    def score(self, batch: Batch, signal: str = "reward") -> torch.Tensor:
        """Score each sample with ``signal`` and return token-level scores (B, R).

        The score sits on the last valid response token, as a reward model's would.
        A batch of step-wise trajectories (:mod:`hfsdk.core.segments`) is scored once
        per trajectory, on its last segment, and every segment gets that score;
        ``<signal>/mean`` is then the mean over trajectories.
        """
        import torch

        scores = self.trajectory_scores(batch, signal)
        mask = batch["response_mask"]
        token_scores = torch.zeros(mask.shape, dtype=torch.float32)
        # The last token the mask keeps (a multi-turn loss mask has holes where tools spoke).
        positions = torch.arange(mask.shape[-1]).expand_as(mask)
        last = torch.where(mask.bool(), positions, torch.zeros_like(positions)).max(dim=-1).values
        self.metrics[f"{signal}/mean"] = float(scores.float().mean())
        rows = trajectory_rows(batch)
        if rows is not None:
            scores = rows.broadcast(scores)
        token_scores[torch.arange(mask.shape[0]), last] = scores.to(torch.float32)
        return token_scores

    def trajectory_scores(self, batch: Batch, signal: str = "reward") -> torch.Tensor:
        """``signal``'s score of each trajectory (B,), its metrics recorded under ``signal/``.

        One score per row for a batch without segments; for step-wise trajectories one
        per trajectory, from its last segment (:func:`hfsdk.core.segments.last_segments`).
        """
        scores, metrics = self.context.signals[signal](last_segments(batch))
        self.record(metrics, f"{signal}/")
        return scores

    def rewards_with_kl(self, batch: Batch, scores_key: str = "token_level_scores") -> torch.Tensor:
        """Token-level rewards: scores minus ``kl_coef``·KL when KL is in the reward."""
        if not self.algo_config.kl_in_reward:
            return batch[scores_key]
        from hfsdk.core.maths.kl import apply_kl_penalty

        rewards, metrics = apply_kl_penalty(
            batch[scores_key],
            batch["old_log_probs"],
            batch["ref_log_probs"],
            batch["response_mask"],
            self.kl_controller.value,
            self._kl_estimator,
        )
        self.kl_controller.update(metrics["kl"], len(batch))
        self.record(metrics, "actor/reward_")
        return rewards

    def estimate_advantages(self, batch: Batch, **inputs: Any) -> AdvantageResult:
        """Run the selected advantage estimator; sets ``advantages`` and ``returns``.

        Returns the estimator's :class:`~hfsdk.core.maths.protocols.AdvantageResult`,
        whose ``extras`` hold what else it computed (e.g. Safe-RLHF's ``cost_returns``).
        On a batch of step-wise trajectories (:mod:`hfsdk.core.segments`) the estimator
        sees one row per trajectory (its last segment; per-row ``inputs`` are selected
        the same way, per-trajectory ones passed as they are), so group statistics count
        each trajectory once, and each trajectory's advantage (the estimator's value at
        the first trained token) is broadcast to every trained token of its segments.
        Only an estimator registered with ``per_sequence=True`` can be broadcast so.
        """
        from hfsdk.core.maths.protocols import AdvantageResult
        from hfsdk.core.plugin_manager import get_registry

        name = self.algo_config.advantage_estimator
        estimator = self._advantage_estimator
        if "values" in batch and "values" not in inputs:
            inputs["values"] = batch["values"]
        rows = trajectory_rows(batch)
        segmented = rows is not None and rows.count < len(batch)
        view = batch
        if segmented:
            if not estimator.extra.get("per_sequence", False):
                registry = get_registry("advantage_estimators")
                usable = sorted(n for n, e in registry.items() if e.extra.get("per_sequence"))
                raise HfsdkError(
                    f"advantage estimator {name!r} (plugin {estimator.plugin!r}) is not "
                    "registered per_sequence=True, so its advantages cannot be shared by the "
                    f"{len(batch)} segments of {rows.count} step-wise trajectories; use a "
                    f"per-sequence estimator ({', '.join(usable) or 'none installed'}) or an "
                    "agent that keeps one segment per trajectory"
                )
            import torch

            view = batch.index(rows.last)
            # Per-row inputs follow the rows chosen; per-trajectory ones already fit.
            inputs = {
                k: v[rows.last] if isinstance(v, torch.Tensor) and len(v) == len(batch) else v
                for k, v in inputs.items()
            }
        result = estimator.impl(
            token_level_rewards=view["token_level_rewards"],
            response_mask=view["response_mask"],
            group_index=list(view["uid"]),
            config=self.config.sections.get("advantage"),  # (none: registered without config_cls)
            **inputs,
        )
        shape = tuple(view["response_mask"].shape)  # a (B,) result failed in the update
        ok = isinstance(result, AdvantageResult)
        got = [tuple(t.shape) for t in (result.advantages, result.returns)] if ok else None
        if got != [shape, shape]:
            raise HfsdkError(
                f"advantage estimator {name!r} (plugin {estimator.plugin!r}) returned "
                f"{f'shapes {got}' if ok else type(result).__name__}; expected "
                f"hfsdk.AdvantageResult(advantages=, returns=), each of the response mask's {shape}"
            )
        if segmented:
            result = broadcast_advantages(result, view["response_mask"], batch, rows)
        batch["advantages"] = result.advantages
        batch["returns"] = result.returns
        return result

    def finish(self, batch: Batch) -> dict[str, float]:
        """Batch-level metrics (lengths, KL to the reference, token counts); returns all."""
        import torch

        from hfsdk.core.maths.masked import masked_fill_zero, masked_mean

        mask = batch["response_mask"]
        self.metrics["response_length/mean"] = float(mask.sum(dim=-1).float().mean())
        if "attention_mask" in batch:
            # The width passes run over: columns some row uses (remove_padding drops the rest).
            self.metrics["perf/sequence_width"] = float(batch["attention_mask"].any(0).sum())
        if "old_log_probs" in batch and "ref_log_probs" in batch:
            # k3 (exp(r) - r - 1, r = ref - old): unbiased for KL(policy || reference) on the
            # policy's samples and never negative, unlike k1 (old - ref) on a finite batch.
            # Computed here, not by name: the metric needs no estimator plugin. r is zeroed
            # where masked (NaN/inf there too), so padding cannot leak through exp.
            r = masked_fill_zero(batch["ref_log_probs"] - batch["old_log_probs"], mask)
            kl = torch.exp(r) - r - 1
            self.metrics["actor/kl"] = float(masked_mean(kl, mask))
        if "rollout_log_probs" in batch and "old_log_probs" in batch:
            # A rollout engine other than the actor (vLLM) reports what it sampled with;
            # a gap to the actor's own log-probs means stale weights or a numerics mismatch.
            gap = (batch["rollout_log_probs"] - batch["old_log_probs"]).abs()[mask.bool()]
            self.metrics["rollout/log_prob_diff_max"] = float(gap.max()) if gap.numel() else 0.0
            self.metrics["rollout/log_prob_diff_mean"] = float(gap.mean()) if gap.numel() else 0.0
        self.metrics["perf/tokens"] = float(batch["attention_mask"].sum())
        self.last_batch = batch  # the step's samples, for trainer.rollout_dump
        metrics, self.metrics = self.metrics, {}
        return metrics

    def replay_update(self, batch: Batch) -> dict[str, float]:
        """Run a finished step's updates again on the batch they saw (``hfsdk replay``).

        The default updates the ``value`` role, if there is one (``update_critic``), and
        then the policy (``update_actor``), as PPO-style programs do, and returns their
        metrics. An algorithm whose updates differ (several critics fed different
        views) overrides it.
        """
        critics = self.spec.roles_of_kind("value")
        if len(critics) > 1:
            raise HfsdkError(
                f"algorithm {self.spec.name!r} has {len(critics)} value roles "
                f"({', '.join(critics)}); replay needs its replay_update() to say how each is "
                "updated, which it does not define"
            )
        metrics: dict[str, float] = {}
        for critic in critics:
            metrics.update(self.role(critic).update_critic(batch))
        metrics.update(self.actor.update_actor(batch))
        return {key: float(value) for key, value in metrics.items()}

    # -- checkpointed state --------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """Controller-side state to checkpoint (KL controller; subclasses add theirs)."""
        return {"kl_controller": self.kl_controller.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.kl_controller.load_state_dict(state["kl_controller"])
