"""What ``update_actor`` and ``update_critic`` minimise, chosen by the caller.

The engine does not hard-code PPO: the algorithm looks its losses up in the
registries and hands them over in one of these objects. Loss functions follow
the registry convention (keyword arguments, ``config``, global counts; they
return ``(loss, metrics)``); see ``hfsdk.PolicyLoss`` and ``hfsdk.ValueLoss``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from hfsdk import LOSS_AGG_MODES, HfsdkError

# Metrics: floats or (value, units) pairs (:func:`add_unit_metrics`).
LossFn = Callable[..., tuple[Any, Mapping[str, Any]]]
KLEstimatorFn = Callable[[Any, Any], Any]


def _check_callable(_instance: object, attribute: attrs.Attribute, value: object) -> None:
    if not callable(value):
        raise TypeError(
            f"'{attribute.name}' must be a callable loss function, got {type(value).__name__}; "
            "look it up in the registry (hfsdk.get_registry(...).get(name).impl)"
        )


@attrs.frozen(kw_only=True)
class ActorObjective:
    """The actor's loss: policy loss + ``kl_loss_coef``·KL − ``entropy_coef``·entropy.

    - ``policy_loss(log_prob=, old_log_prob=, advantages=, response_mask=,
      config=policy_loss_config, aggregation=)`` (an ``hfsdk.PolicyLoss``); the
      engine builds the ``hfsdk.LossAggregation`` of each mini-batch from
      ``loss_agg_mode``, the global counts, ``norm_length`` and the dp size.
    - ``kl_loss_coef``, ``kl_estimator``, ``entropy_coef``: the algorithm's
      ``hfsdk.ActorLossTerms`` (the backend does not decide the loss mix).
    - ``kl_estimator``: per-token ``fn(log_prob, ref_log_prob)`` (or a
      registered name). The KL term is added when ``kl_loss_coef > 0`` (it
      needs ``ref_log_probs`` in the batch) and reported as ``actor/kl_loss``;
      with a reference ``actor/kl`` is reported too, with the non-negative
      ``k3`` estimator whatever the loss uses, as a per-token mean whatever
      ``loss_agg_mode`` is. Where the batch has old
      log-probs, ``Algorithm.finish`` replaces it with the rollout policy's KL
      computed from them; an exactly on-policy update has none, and the update's
      forwards are then the rollout policy's.
    - ``policy_loss_name`` / ``policy_loss_plugin``: the registered name and its
      plugin, for the errors that name a loss returning something unusable.
    - ``norm_length``: the constant length of ``seq-mean-token-sum-norm``;
      ``None`` uses the response width (the same on every rank, since rollouts
      pad responses to the configured maximum).
    """

    policy_loss: LossFn = attrs.field(validator=_check_callable)
    policy_loss_config: Any = None
    policy_loss_name: str | None = None
    policy_loss_plugin: str | None = None
    loss_agg_mode: str = attrs.field(
        default="token-mean", validator=attrs.validators.in_(LOSS_AGG_MODES)
    )
    kl_estimator: KLEstimatorFn | str | None = None
    kl_loss_coef: float = attrs.field(default=0.0, validator=attrs.validators.ge(0.0))
    entropy_coef: float = attrs.field(default=0.0, validator=attrs.validators.ge(0.0))
    norm_length: float | None = None
    corrections: tuple[tuple[str, Callable[..., Any], Any], ...] = attrs.field(
        default=(), converter=tuple
    )
    """Rollout corrections ``(name, fn, config)`` between the rollout's policy
    (``rollout_log_probs``) and ``π_old`` (:mod:`hfsdk_rollout_corrections.contract`),
    applied as a loss weight and a mask; none by default."""
    token_terms: tuple[Any, ...] = attrs.field(default=(), converter=tuple)
    """The algorithm's ``hfsdk.TokenIdsLossTerm`` terms: the engine gathers the policy's
    log-probs at each term's ``ids_key`` ids and :func:`actor_micro_loss` adds the term."""

    @property
    def policy_loss_label(self) -> str:
        """``policy loss 'NAME' (plugin 'P')`` for errors; the function's name when unregistered."""
        name = self.policy_loss_name or getattr(self.policy_loss, "__name__", None)
        label = f"policy loss {name or type(self.policy_loss).__name__!r}"
        return f"{label} (plugin {self.policy_loss_plugin!r})" if self.policy_loss_plugin else label

    @property
    def ids_keys(self) -> tuple[str, ...]:
        """The batch columns of token ids the engine gathers log-probs at (each once)."""
        return tuple(dict.fromkeys(term.ids_key for term in self.token_terms))

    @kl_loss_coef.validator
    def _kl_needs_estimator(self, _attr: attrs.Attribute, value: float) -> None:
        if value > 0 and self.kl_estimator is None:
            raise ValueError(
                f"kl_loss_coef={value} needs a kl_estimator (a callable or a registered name "
                "such as 'k3'); pass one or set kl_loss_coef to 0"
            )


@attrs.frozen(kw_only=True)
class CriticObjective:
    """The critic's loss: ``value_loss(values=, old_values=, returns=, response_mask=, ...)``.

    ``old_values`` are the batch's ``values`` (from ``compute_values`` before
    the update), ``returns`` its ``returns``.
    """

    value_loss: LossFn = attrs.field(validator=_check_callable)
    value_loss_config: Any = None
    loss_agg_mode: str = attrs.field(
        default="token-mean", validator=attrs.validators.in_(LOSS_AGG_MODES)
    )
    norm_length: float | None = None


def _describe(value: Any) -> str:
    """What a loss returned, for an error: a tensor's shape, else its type."""
    import torch

    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    return f"a {type(value).__name__}"


def checked_policy_loss_result(
    objective: ActorObjective, result: Any, log_prob: Any
) -> tuple[Any, Mapping[str, Any]]:
    """The policy loss's ``(loss, metrics)``, or one ``HfsdkError`` line saying what is wrong.

    Without these checks a float or a (B,) loss failed later with a bare torch error, and a
    ``.detach()``-ed loss was accepted: backward then trained only the KL and entropy terms.
    """
    import torch

    label = objective.policy_loss_label
    if not isinstance(result, tuple | list) or len(result) != 2:
        raise HfsdkError(
            f"{label} returned {_describe(result)}; expected a (loss, metrics) pair; return "
            "the aggregated loss and a dict of float metrics"
        )
    loss, metrics = result
    if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
        raise HfsdkError(
            f"{label} returned {_describe(loss)} as its loss; expected a 0-dim tensor; "
            "aggregate the (B, T) loss matrix with hfsdk.aggregate_loss(loss_mat, "
            "response_mask, aggregation)"
        )
    if log_prob.requires_grad and not loss.requires_grad:
        raise HfsdkError(
            f"{label} returned a loss without a gradient (detached from log_prob); expected "
            "one computed from log_prob, else only the KL and entropy terms would train; drop "
            "the .detach() / no_grad around it"
        )
    if not isinstance(metrics, Mapping):
        raise HfsdkError(
            f"{label} returned {_describe(metrics)} as its metrics; expected a mapping of "
            "metric names to floats (an empty dict is fine)"
        )
    return loss, metrics


def actor_micro_loss(
    objective: ActorObjective,
    micro: Any,
    log_prob: Any,
    entropy: Any,
    *,
    aggregation: Any,
    counts: Any,
    has_reference: bool,
    metrics: Any,
    ids_log_probs: Mapping[str, Any] | None = None,
) -> Any:
    """One micro-batch's actor loss from its response log-probs and entropy.

    Shared by every training backend so the loss mix (policy loss, entropy bonus,
    KL loss, token terms) and the ``actor/*`` metrics mean the same on fsdp and megatron.
    ``metrics`` is the engine's ``MetricAccumulator``; the caller runs backward.
    ``ids_log_probs`` maps each of ``objective.ids_keys`` to the policy's log-probs
    (B, R, k) at that column's ids (with gradient).
    """
    from hfsdk import aggregate_loss, masked_fill_zero
    from hfsdk_backend_common.loss_terms import entropy_bonus, kl_loss
    from hfsdk_rollout_corrections.contract import combine_corrections

    device = log_prob.device
    mask = micro["response_mask"].to(device)
    if "old_log_probs" in micro:
        old_log_prob = micro["old_log_probs"].to(device)
    else:  # exactly on-policy (see update_actor): the sampler is the current policy
        old_log_prob = masked_fill_zero(log_prob.detach(), mask)
    advantages = micro["advantages"].to(device)
    tokens = float((mask != 0).sum())
    pg_mask, pg_aggregation = mask, aggregation
    if objective.corrections:
        if "rollout_log_probs" not in micro:
            names = ", ".join(name for name, _fn, _cfg in objective.corrections)
            raise HfsdkError(
                f"rollout corrections ({names}) need the rollout's rollout_log_probs in the "
                "batch, which this rollout does not return; use a rollout that reports them "
                "(vllm, or a pipeline other than sync) or drop rollout_correction / "
                "algorithm.is_correction"
            )
        result = combine_corrections(
            objective.corrections,
            old_log_prob=old_log_prob,
            rollout_log_prob=micro["rollout_log_probs"].to(device),
            log_prob=log_prob.detach(),
            advantages=advantages,
            response_mask=mask,
        )
        # A loss weight and a smaller mask, never scaled advantages: a loss that normalises
        # its advantages cannot undo it, and pg_clipfrac counts only the tokens kept.
        pg_mask = result.keep.to(mask.dtype)
        pg_aggregation = attrs.evolve(
            aggregation,
            token_weights=result.weights,
            seq_token_counts=(mask != 0).sum(dim=-1),
        )
        is_metrics = dict(result.metrics)
        for name in ("is_weight_max", "is_ratio_max"):
            metrics.add_max(f"actor/{name}", is_metrics.pop(name))
        # Shares of the valid tokens unless a correction names its unit (kept tokens, sequences).
        add_unit_metrics(metrics, "actor/", is_metrics, tokens)
    result = objective.policy_loss(
        log_prob=log_prob,
        old_log_prob=old_log_prob,
        advantages=advantages,
        response_mask=pg_mask,
        config=objective.policy_loss_config,
        aggregation=pg_aggregation,
    )
    pg_loss, pg_metrics = checked_policy_loss_result(objective, result, log_prob)
    loss = pg_loss
    if objective.entropy_coef > 0:
        entropy_loss, _ = entropy_bonus(entropy, mask, aggregation, objective.entropy_coef)
        loss = loss + entropy_loss
    # The reported entropy and KL are means per token whatever loss_agg_mode the loss uses
    # (the loss's mode read ~3x high under seq-mean-token-sum, far low under Dr.GRPO's norm);
    # the global counts and dp size stay, so the micro-batches' and ranks' shares still add up.
    per_token = attrs.evolve(aggregation, mode="token-mean")
    metrics.add_share("actor/entropy", float(aggregate_loss(entropy.detach(), mask, per_token)))
    if has_reference:
        ref_log_prob = micro["ref_log_probs"].to(device)
        kl_value, _ = kl_loss(
            log_prob, ref_log_prob, mask, aggregation, objective.kl_estimator or "k1"
        )
        if objective.kl_loss_coef > 0:
            loss = loss + objective.kl_loss_coef * kl_value
            metrics.add_share("actor/kl_loss", float(kl_value.detach()))
        # The reported KL: k3, never negative (a k1 mean can be, on a finite batch), and a mean
        # per token (per_token, above) like actor/entropy.
        shown, _ = kl_loss(log_prob.detach(), ref_log_prob, mask, per_token, "k3")
        metrics.add_share("actor/kl", float(shown))
    for term in objective.token_terms:
        if ids_log_probs is None or term.ids_key not in ids_log_probs:
            raise HfsdkError(
                f"actor loss term {term.name!r} needs the policy's log-probs at the "
                f"{term.ids_key!r} ids, which this backend did not gather; use a backend that "
                "supports token loss terms (fsdp)"
            )
        term_loss, term_metrics = term.fn(
            log_probs=ids_log_probs[term.ids_key],
            batch=micro,
            response_mask=mask,
            aggregation=aggregation,
            config=term.config,
        )
        loss = loss + term.coef * term_loss
        metrics.add_share(f"actor/{term.name}", float(term_loss.detach()))
        for name, value in term_metrics.items():
            metrics.add_token_share(f"actor/{term.name}/{name}", float(value), tokens, counts)
    metrics.add_share("actor/pg_loss", float(pg_loss.detach()))
    metrics.add_share("actor/loss", float(loss.detach()))
    # A loss's float metrics are means over the tokens of the mask it was given (those a
    # correction kept); a (value, units) pair is a mean over its own units (DPO: pairs).
    add_unit_metrics(metrics, "actor/", pg_metrics, float((pg_mask != 0).sum()))
    return loss


def add_unit_metrics(
    metrics: Any, prefix: str, values: Mapping[str, Any], default_units: float
) -> None:
    """Add a micro-batch's metrics as means weighted by their units, so that one micro-batch,
    several and several ranks report the same mean (weighting a per-pair or per-kept-token
    mean by the valid tokens made it depend on how the rows were split).

    A value is a float (a mean over ``default_units``) or a ``(value, units)`` pair.
    """
    for name, value in values.items():
        mean, units = value if isinstance(value, tuple | list) else (value, default_units)
        metrics.add_weighted(f"{prefix}{name}", float(mean), float(units))


def loss_agg_mode_problems(config: Any) -> list[str] | None:
    """An ``algorithm.loss_agg_mode`` the actor cannot aggregate with, refused with the config.

    The core's config field validates it, but an algorithm's config class that redeclares
    the field (to change its default) drops that validator, and the run then failed in
    the first update with attrs' own message.
    """
    mode = getattr(config.algorithm, "loss_agg_mode", None)  # a reward model trains no policy
    if mode is None or mode in LOSS_AGG_MODES:
        return None
    return [f"algorithm.loss_agg_mode is {mode!r}; expected one of {', '.join(LOSS_AGG_MODES)}"]


def adaptive_kl_problems(config: Any) -> list[str] | None:
    """An adaptive reward-KL controller that starts at ``kl_coef: 0``, as a
    ``hfsdk_validate_config`` message: its update multiplies the coefficient, so it stays 0
    and the run has no KL penalty. Only under ``kl_in_reward: true``, where the controller is
    read (otherwise :func:`unused_kl_loss` warns, and a saved run still resumes)."""
    algo = config.algorithm
    read = getattr(algo, "kl_in_reward", False)
    if not read or getattr(algo, "kl_controller", None) != "adaptive" or algo.kl_coef > 0:
        return None
    return [
        f"algorithm.kl_controller=adaptive with algorithm.kl_coef={algo.kl_coef:g}: the adaptive "
        "controller multiplies the coefficient, so from 0 it stays 0 (no KL penalty); it needs "
        "a positive starting algorithm.kl_coef (e.g. 0.05), or use kl_controller=fixed"
    ]


def unused_kl_loss(config: Any, spec: Any = None, prepared: Any = None) -> str | None:
    """A preflight warning for KL settings that ``algorithm.kl_in_reward`` makes do nothing.

    With ``kl_in_reward: true`` the KL goes in the reward only
    (:func:`hfsdk.default_actor_objective`) and an ``algorithm.kl_loss_coef`` was dropped
    silently; with ``kl_in_reward: false`` (GRPO's default) the reward's ``kl_coef``,
    ``kl_controller``, ``target_kl`` and ``kl_horizon`` were (:func:`_ignored_reward_kl`).
    A warning, not a refusal: a run saved with such a config must still resume. A value at
    its config class's default (GRPO's 0.01) is a default, not a request."""
    algo = config.algorithm
    if not getattr(algo, "kl_in_reward", False):
        return _ignored_reward_kl(algo)
    coef = getattr(algo, "kl_loss_coef", 0.0)
    if coef <= 0 or _class_default(algo, "kl_loss_coef") == coef:
        return None
    return (
        f"algorithm.kl_loss_coef={coef:g} has no effect: algorithm.kl_in_reward is true, which "
        "puts the KL in the reward instead of the loss; set kl_in_reward: false to use a KL "
        "loss, or remove kl_loss_coef"
    )


# The reward-KL settings that only Algorithm.rewards_with_kl reads, under kl_in_reward: true.
_REWARD_KL_KEYS = ("kl_coef", "kl_controller", "target_kl", "kl_horizon")


def _class_default(algo: Any, name: str) -> Any:
    """The default of ``algo``'s config class for field ``name``; ``None`` when it has none."""
    if not attrs.has(type(algo)):
        return None
    field = getattr(attrs.fields(type(algo)), name, None)
    return None if field is None else field.default


def _ignored_reward_kl(algo: Any) -> str | None:
    """The warning for reward-KL settings changed from their defaults beside
    ``kl_in_reward: false``, where the reward carries no KL; ``None`` when none was changed.
    A ``kl_coef`` of 0 asks for no KL, so it is never named (the importers write it)."""
    if not attrs.has(type(algo)):
        return None  # no class defaults to tell a request from a default
    changed = [
        f"algorithm.{name}={getattr(algo, name)}"
        for name in _REWARD_KL_KEYS
        if hasattr(algo, name)
        and getattr(algo, name) != _class_default(algo, name)
        and not (name == "kl_coef" and getattr(algo, name) == 0)
    ]
    if not changed:
        return None
    verb = "has" if len(changed) == 1 else "have"
    # Only what the algorithm's own config accepts is suggested: dapo refuses any KL.
    ways: list[str] = []
    if _accepts(algo, kl_in_reward=True):
        ways.append("set algorithm.kl_in_reward=true for a KL penalty in the reward")
    if hasattr(algo, "kl_loss_coef") and _accepts(algo, kl_loss_coef=0.01):
        ways.append("use algorithm.kl_loss_coef for a KL in the loss")
    remove = f"remove {'it' if len(changed) == 1 else 'them'}"
    advice = (
        f"{', '.join(ways)}, or {remove}" if ways else f"this algorithm takes no KL, so {remove}"
    )
    return (
        f"{', '.join(changed)} {verb} no effect: algorithm.kl_in_reward is false, so the "
        f"reward carries no KL; {advice}"
    )


def _accepts(algo: Any, **changes: Any) -> bool:
    """Whether ``algo``'s config class accepts ``changes`` (its validators and
    ``__attrs_post_init__`` decide, as at config load)."""
    try:
        attrs.evolve(algo, **changes)
    except (ValueError, TypeError):
        return False
    return True


def actor_objective_from(run_config: Any, terms: Any) -> ActorObjective:
    """The actor's objective for one update: the run's policy loss and the algorithm's terms.

    ``terms`` are the algorithm's ``hfsdk.ActorLossTerms`` (KL as a loss, entropy);
    ``norm_length`` is the responses' width (``seq-mean-token-sum-norm``): the multi-turn
    budget for multi-turn rollouts, else ``rollout.max_response_length``.
    """
    from hfsdk import get_registry, resolve_kl_estimator
    from hfsdk_rollout_corrections.section import resolve_rollout_corrections

    algo = run_config.algorithm
    # A registered name is resolved here, once per run, not at every micro-batch's KL term
    # (k1 is what the reported KL uses when the algorithm names none).
    kl_estimator = resolve_kl_estimator(terms.kl_estimator or "k1")
    entry = get_registry("policy_losses")[algo.policy_loss]
    return ActorObjective(
        corrections=resolve_rollout_corrections(run_config),
        policy_loss=entry.impl,
        policy_loss_config=run_config.sections.get("policy_loss"),  # (none: no config_cls)
        policy_loss_name=algo.policy_loss,
        policy_loss_plugin=entry.plugin,
        loss_agg_mode=algo.loss_agg_mode,
        kl_estimator=kl_estimator,
        kl_loss_coef=terms.kl_loss_coef,
        entropy_coef=terms.entropy_coef,
        norm_length=float(run_config.rollout.response_width()),
        token_terms=terms.token_terms,
    )


def critic_objective_from(run_config: Any) -> CriticObjective:
    """The critic's objective for one update: the run's value loss and aggregation."""
    from hfsdk import get_registry

    algo = run_config.algorithm
    return CriticObjective(
        value_loss=get_registry("value_losses")[algo.value_loss].impl,
        value_loss_config=run_config.sections.get("value_loss"),
        loss_agg_mode=algo.loss_agg_mode,
        norm_length=float(run_config.rollout.response_width()),
    )
