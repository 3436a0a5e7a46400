"""What an algorithm plugin registers: one :class:`AlgorithmSpec` per algorithm.

The spec is the single description of an algorithm. Everything else is
derived from it:

- the run config's sections (one per role, the ``algorithm`` section from
  ``config_cls``; roles of kind ``scorer`` are signal sections);
- the role kinds a training backend builds (it never guesses from a role's name);
- the placement search's :class:`~hfsdk.core.dataflow.Dataflow`, derived from
  the role kinds, whose stage parts are the names ``step()`` times (the
  program cannot time a stage the spec does not declare);
- the default task's settings (``preset``), merged under the user's config;
- the actor's objective (``actor_objective``): which terms the policy loss gets.

Keep this module free of heavy imports: ``hfsdk list`` and the placement search read it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Literal

import attrs

from hfsdk.core.dataflow import Dataflow, Stage
from hfsdk.core.errors import HfsdkError

RoleKind = Literal["policy", "value", "frozen_policy", "scorer", "score_model"]
ROLE_KINDS: tuple[str, ...] = ("policy", "value", "frozen_policy", "scorer", "score_model")
"""What a role is, independent of its name.

- ``policy``: the trained causal LM; generates, computes log-probs, is updated.
- ``value``: a trained critic with one value per response token.
- ``frozen_policy``: a frozen causal LM (the reference) that only computes log-probs.
- ``scorer``: a signal (reward, cost): reward functions and/or a scoring model.
- ``score_model``: a sequence scorer being trained (a reward or cost model): a
  scalar head read at the last token, as a ``scorer``'s model is, updated by
  ``update_score_model`` with the loss the algorithm's ``score_objective`` gives.
"""

KIND_OPERATIONS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "policy": ("generate_sequences", "compute_log_prob", "update_actor"),
        "value": ("compute_values", "update_critic"),
        "frozen_policy": ("compute_ref_log_prob",),
        "scorer": ("compute_scores",),
        "score_model": ("compute_scores", "update_score_model"),
    }
)
"""The worker operations every training backend offers for a role of each kind (the
contract an algorithm's program may call on ``self.role(name)``; backends may add more)."""

REF_TOP_K = "ref_top_k"
"""``meta`` key of a batch handed to a ``frozen_policy`` role's ``compute_ref_log_prob``:
k > 0 asks for the k most likely tokens of every response position besides the sampled
tokens' log-probs, as ``ref_top_k_log_probs`` (float) and ``ref_top_k_ids`` (int64), both
(B, R, k), highest first, temperature-scaled as the log-probs are, 0 where masked. A
backend that cannot compute them refuses in one line. Absent or 0: log-probs only."""

TRAINED_KINDS: tuple[str, ...] = ("policy", "value", "score_model")
"""Role kinds whose weights a run updates (and checkpoints)."""

_NAME = attrs.validators.matches_re(r"^[a-z][a-z0-9_]*$")
_STAGE_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@attrs.frozen(kw_only=True)
class RoleSpec:
    """One model role of an algorithm: its name (the config section) and its kind."""

    name: str = attrs.field(validator=_NAME)
    kind: RoleKind = attrs.field(validator=attrs.validators.in_(ROLE_KINDS))
    optional: bool = False
    """A scorer only validation reads: unset (no functions, no model), a run goes without."""


@attrs.frozen(kw_only=True)
class TokenIdsLossTerm:
    """An actor loss term on the policy's log-probs of given token ids at each response position.

    The contract with every training backend: for each micro-batch the backend
    gathers, with gradient, the policy's log-softmax (temperature-scaled as the
    sampler's) at the ids of the batch's ``ids_key`` column, an integer tensor
    (B, R, k), and adds ``coef`` × ``fn(log_probs=(B, R, k), batch=micro,
    response_mask=(B, R), aggregation=, config=config)`` to the loss; ``fn``
    returns ``(loss, metrics)`` like a policy loss, its metrics reported as
    ``actor/<name>`` (the loss) and ``actor/<name>/<metric>``. It lets an
    algorithm train on a distribution over a few tokens per position (a
    teacher's top-k, for distillation) without the full-vocabulary logits ever
    leaving the backend. A backend that cannot gather refuses in one line.
    """

    name: str = attrs.field(validator=_NAME)
    ids_key: str
    fn: Callable[..., tuple[Any, dict[str, float]]]
    coef: float = attrs.field(default=1.0, validator=attrs.validators.ge(0.0))
    config: Any = None


@attrs.frozen(kw_only=True)
class ActorLossTerms:
    """The terms of the actor's loss besides the policy loss, chosen by the algorithm.

    ``kl_loss_coef`` > 0 adds ``kl_loss_coef``·KL(π‖π_ref) (``kl_estimator``) to
    the loss (GRPO's KL-as-loss); algorithms that put KL in the reward set it
    to 0. ``entropy_coef`` > 0 subtracts ``entropy_coef``·entropy.
    ``token_terms`` are extra :class:`TokenIdsLossTerm` terms (none by default).
    """

    kl_loss_coef: float = attrs.field(default=0.0, validator=attrs.validators.ge(0.0))
    kl_estimator: str = "k1"
    entropy_coef: float = attrs.field(default=0.0, validator=attrs.validators.ge(0.0))
    token_terms: tuple[TokenIdsLossTerm, ...] = attrs.field(default=(), converter=tuple)


def default_actor_objective(algorithm_config: Any) -> ActorLossTerms:
    """KL as a loss term unless the config puts it in the reward; entropy bonus as configured."""
    cfg = algorithm_config
    return ActorLossTerms(
        kl_loss_coef=0.0 if cfg.kl_in_reward else cfg.kl_loss_coef,
        kl_estimator=cfg.kl_estimator,
        entropy_coef=cfg.entropy_coef,
    )


def derive_dataflow(
    roles: tuple[RoleSpec, ...],
    extra_generations: tuple[str, ...] = (),
    extra_stages: tuple[str, ...] = (),
) -> Dataflow:
    """The three-stage dataflow every on-policy program here follows, from the role kinds.

    - ``generation``: the policy generates (timed as ``generation``); each name
      in ``extra_generations`` is one more generation stage of the policy
      (e.g. ReMax's ``greedy_generation``).
    - ``preparation``: every role infers (timed as ``old_log_prob``,
      ``ref_log_prob``, ``values``, one timing per scorer named after it, and
      ``advantages``).
    - ``training``: the policy and the value roles train (timed as
      ``update_critic`` and ``update_actor``).

    Each name in ``extra_stages`` is one more timed part of the preparation
    stage: controller-side work of the program (filtering, drawing more
    prompts) that places no role of its own.
    """
    kinds = {role.name: role.kind for role in roles}
    by_kind = {kind: [n for n, k in kinds.items() if k == kind] for kind in ROLE_KINDS}
    policy = by_kind["policy"]
    stages = []
    if policy:  # a program that trains only a scorer (a reward model) generates nothing
        stages.append(Stage(name="generation", work=[(p, "generation") for p in policy]))
        stages += [
            Stage(name=n, work=[(p, "generation") for p in policy]) for n in extra_generations
        ]
    prep_timings = ["old_log_prob"] if policy else []
    if by_kind["frozen_policy"]:
        prep_timings.append("ref_log_prob")
    if by_kind["value"]:
        prep_timings.append("values")
    prep_timings += by_kind["scorer"]
    prep_timings.append("advantages")
    prep_timings += extra_stages
    stages.append(
        Stage(
            name="preparation",
            work=[(role.name, "inference") for role in roles],
            timings=prep_timings,
        )
    )
    train_timings = ["update_critic"] if by_kind["value"] else []
    train_timings += ["update_score_model"] if by_kind["score_model"] else []
    train_timings += ["update_actor"] if policy else []
    trained = [r.name for r in roles if r.kind in TRAINED_KINDS]
    stages.append(
        Stage(name="training", work=[(r, "training") for r in trained], timings=train_timings)
    )
    return Dataflow(roles=tuple(kinds), stages=stages)


def _roles(value: Any) -> tuple[RoleSpec, ...]:
    return tuple(r if isinstance(r, RoleSpec) else RoleSpec(name=r[0], kind=r[1]) for r in value)


@attrs.frozen(kw_only=True)
class AlgorithmSpec:
    """Everything the SDK needs to know about one algorithm, stated once.

    - ``name``: what ``--algo`` selects.
    - ``program``: the :class:`~hfsdk.core.algorithm.Algorithm` subclass whose
      ``step()`` is the single-controller program.
    - ``config_cls``: the ``algorithm`` section's attrs class.
    - ``roles``: :class:`RoleSpec` (or ``(name, kind)`` pairs) in a stable order;
      exactly one ``policy``, or none and at least one ``score_model`` (a program
      that trains a reward or cost model only).
    - ``extra_generations``: generation stages beyond the first (timed names).
    - ``extra_stages``: more names ``step()`` may time (``timing/<name>_s``),
      e.g. ``dynamic_sampling``; timed parts of the preparation stage.
    - ``preset``: the default task's settings (a nested config mapping merged
      *under* the user's config when no training data is given): what the
      task needs (response length, batch sizes, learning rates), never a
      ``backend``. Each section applies to whichever backend the user selects,
      with only the keys that backend's config class has
      (:mod:`hfsdk.core.config.presets`).
    - ``actor_objective``: ``fn(algorithm_config) -> ActorLossTerms``.
    - ``summary``: one line for ``hfsdk list algorithms`` (defaults to the
      program's docstring).
    - ``on_policy_only``: why the program needs every batch sampled from the
      weights it trains (e.g. ReMax's greedy baseline), or ``None``; a
      ``trainer.pipeline`` other than ``sync`` is then refused with this reason.
    - ``trains_on_generations``: ``False`` for a program that trains on the dataset's own
      responses (SFT, DPO) and generates only to validate: what only a rollout reads (a
      row's images) never reaches its update, so plugins refuse such rows for it.
    - ``score_objective``: ``fn(algorithm_config) -> loss`` for the ``score_model``
      roles: ``loss(scores, batch) -> (loss tensor, metrics)`` with ``scores`` (B,)
      the head's output at each row's last response token (with gradients).
      It must pickle (a module-level function or an attrs instance).
    - ``default_model``: which default-task model a run without
      ``actor.model_path`` starts from: ``warm`` (the warm-started one every RL
      algorithm uses) or ``cold`` (the same architecture and tokenizer, freshly
      initialised: for programs that make the warm start themselves, e.g. SFT).
    - ``default_data``: what a run without ``data.train_files`` trains on: the
      default task's ``prompts`` (``prompt``, ``answer``) or its
      ``preference_pairs`` (``prompt``, ``chosen``: the right answer,
      ``rejected``: a wrong one, ``answer``), for DPO and reward models.
    - ``configure``: ``fn(spec, algorithm_config) -> AlgorithmSpec``, the spec of a run
      whose ``algorithm`` section is that config (e.g. roles the config names,
      one per teacher), or ``None``: every run's spec is this one. Code that
      has a run config reads the run's spec with :func:`hfsdk.run_spec`.
    """

    name: str
    program: type
    config_cls: type
    roles: tuple[RoleSpec, ...] = attrs.field(converter=_roles)
    extra_generations: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    extra_stages: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    preset: Mapping[str, Any] = attrs.field(
        factory=dict, converter=lambda d: MappingProxyType(dict(d))
    )
    actor_objective: Callable[[Any], ActorLossTerms] = default_actor_objective
    summary: str | None = None
    on_policy_only: str | None = None
    trains_on_generations: bool = True
    score_objective: Callable[[Any], Callable[..., Any]] | None = None
    default_model: Literal["warm", "cold"] = attrs.field(
        default="warm", validator=attrs.validators.in_(("warm", "cold"))
    )
    default_data: Literal["prompts", "preference_pairs"] = attrs.field(
        default="prompts", validator=attrs.validators.in_(("prompts", "preference_pairs"))
    )
    configure: Callable[[AlgorithmSpec, Any], AlgorithmSpec] | None = None
    dataflow: Dataflow = attrs.field(init=False)
    """What the placement search reads (derived, see :func:`derive_dataflow`)."""

    def __attrs_post_init__(self) -> None:
        dataflow = derive_dataflow(self.roles, self.extra_generations, self.extra_stages)
        object.__setattr__(self, "dataflow", dataflow)

    @roles.validator
    def _check_roles(self, _attr: attrs.Attribute, value: tuple[RoleSpec, ...]) -> None:
        names = [r.name for r in value]
        if len(set(names)) != len(names):
            raise ValueError(f"algorithm {self.name!r} lists a role twice: {names}")
        policies = [r.name for r in value if r.kind == "policy"]
        scorers = [r.name for r in value if r.kind == "score_model"]
        if len(policies) > 1 or not (policies or scorers):
            raise ValueError(
                f"algorithm {self.name!r} needs exactly one role of kind 'policy' (or none and "
                f"a 'score_model' role it trains), got policies {policies}"
            )

    @extra_stages.validator
    def _check_extra_stages(self, _attr: attrs.Attribute, value: tuple[str, ...]) -> None:
        derived = derive_dataflow(self.roles, self.extra_generations)
        taken = {t for stage in derived.stages for t in stage.timed_names}
        for name in value:
            if not isinstance(name, str) or not _STAGE_NAME.match(name):
                raise ValueError(
                    f"algorithm {self.name!r}: extra stage {name!r} is not a name of lowercase "
                    "letters, digits and '_' starting with a letter"
                )
            if name in taken or value.count(name) > 1:
                raise ValueError(
                    f"algorithm {self.name!r}: extra stage {name!r} is declared twice (the "
                    f"derived stages time: {', '.join(sorted(taken))}); choose another name"
                )

    @preset.validator
    def _check_preset(self, _attr: attrs.Attribute, value: Mapping[str, Any]) -> None:
        for section, values in value.items():
            if isinstance(values, Mapping) and "backend" in values:
                raise ValueError(
                    f"algorithm {self.name!r}: preset section {section!r} names a backend "
                    f"({values['backend']!r}); a preset says what the task needs and applies "
                    "to whichever backend is selected (keys a backend lacks are left out), "
                    "so remove 'backend'"
                )

    @property
    def role_names(self) -> tuple[str, ...]:
        """The roles' names, in order."""
        return tuple(r.name for r in self.roles)

    @property
    def has_policy(self) -> bool:
        """Whether the algorithm has a ``policy`` role (a reward-model trainer has none)."""
        return any(r.kind == "policy" for r in self.roles)

    @property
    def policy_role(self) -> str:
        """The name of the one ``policy`` role (``actor`` in every algorithm here).

        A spec without one (it trains a ``score_model`` only) has none: see
        :attr:`main_role`.
        """
        for role in self.roles:
            if role.kind == "policy":
                return role.name
        raise HfsdkError(
            f"algorithm {self.name!r} has no role of kind 'policy' (it trains "
            f"{', '.join(self.roles_of_kind('score_model'))}); it cannot generate"
        )

    @property
    def main_role(self) -> str:
        """The role whose model is the run's result: the policy, else the first score model.

        Its tokenizer is the run's and it is exported in HF format at the end.
        """
        if self.has_policy:
            return self.policy_role
        return self.roles_of_kind("score_model")[0]

    def kind_of(self, role: str) -> RoleKind:
        """The declared kind of ``role``."""
        for spec in self.roles:
            if spec.name == role:
                return spec.kind
        raise KeyError(f"algorithm {self.name!r} has no role {role!r}; roles: {self.role_names}")

    def for_run(self, algorithm_config: Any) -> AlgorithmSpec:
        """The spec of a run whose ``algorithm`` section is ``algorithm_config`` (see
        ``configure``); this spec when it has no ``configure``."""
        if self.configure is None or algorithm_config is None:
            return self
        return self.configure(self, algorithm_config)

    def roles_of_kind(self, kind: str) -> tuple[str, ...]:
        """Names of the roles of ``kind``, in order."""
        return tuple(r.name for r in self.roles if r.kind == kind)

    @property
    def timings(self) -> frozenset[str]:
        """Every stage name ``step()`` may time."""
        return frozenset(t for stage in self.dataflow.stages for t in stage.timed_names)
