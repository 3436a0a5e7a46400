"""The Tinker API's built-in losses, per datum, summed over tokens (the API's reduction).

Each takes the trained policy's log-probabilities of the datum's ``target_tokens``
(``logprobs``, with gradient), the datum's other ``loss_fn_inputs`` as tensors of
the same length, and ``loss_fn_config``; it returns the datum's loss (a scalar).
Gradients of several ``forward_backward`` calls add up until ``optim_step``, which
is why every loss is a sum: the caller scales ``weights`` / ``advantages``.

- ``cross_entropy``: ``-Σ weights · logp`` (``weights`` default 1).
- ``importance_sampling``: ``-Σ exp(logp - sampler_logp) · A`` (REINFORCE with the
  sampler's log-probs in ``logprobs`` as the behaviour policy).
- ``ppo``: ``-Σ min(r · A, clip(r, low, high) · A)``, ``r = exp(logp - sampler_logp)``;
  ``low`` / ``high`` from the datum's ``clip_low_threshold`` / ``clip_high_threshold``
  when given, else ``loss_fn_config``'s, else 0.8 / 1.2.
- ``cispo``: ``-Σ sg(clip(r, low, high)) · logp · A`` (the clipped ratio as a weight).
- ``dro``: ``-Σ (logp · A - β/2 · (logp - sampler_logp)²)``: REINFORCE with a quadratic
  penalty that keeps the learner near the sampler; ``β`` from ``loss_fn_config["beta"]``,
  else :data:`DEFAULT_DRO_BETA`.
- ``gspo`` (GSPO-token): one sequence ratio ``s = exp(mean_M(logp - sampler_logp))`` over the
  positions ``M`` where ``sequence_ratio_mask`` is non-zero; every token's ratio has ``s``'s
  value and its own ``logp``'s gradient (``s_t = sg(s) · exp(logp - sg(logp))``); then PPO's
  clipped objective with ``s_t`` in place of ``r`` (same bounds as ``ppo``).

``stable_reinforce`` is not served: the SDK (tinker 0.38.0) only names it
(``LossFnType``), mentions a ``kl_coeff`` in ``loss_fn_config`` and has samplers
record "stability information" (``record_stability_info``) that datums reference
by ``sequence_id`` (provenance spans); neither the objective nor what is recorded
is defined in the SDK, its docs or tinker-cookbook, so there is nothing to implement
against.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping

import torch

from hfsdk import HfsdkError

LossFn = Callable[
    [torch.Tensor, Mapping[str, torch.Tensor], Mapping[str, float | str]], torch.Tensor
]

DEFAULT_CLIP_LOW = 0.8
DEFAULT_CLIP_HIGH = 1.2
DEFAULT_DRO_BETA = 0.05
"""``dro``'s penalty weight when ``loss_fn_config`` has no ``beta`` (the API documents none)."""


def _need(inputs: Mapping[str, torch.Tensor], loss: str, *keys: str) -> list[torch.Tensor]:
    missing = [k for k in keys if k not in inputs]
    if missing:
        raise HfsdkError(
            f"loss {loss!r} needs loss_fn_inputs {list(keys)} (plus target_tokens); "
            f"the datum lacks {missing}"
        )
    return [inputs[k] for k in keys]


def cross_entropy(
    logp: torch.Tensor, inputs: Mapping[str, torch.Tensor], config: Mapping[str, float | str]
) -> torch.Tensor:
    """Weighted negative log-likelihood of the target tokens."""
    weights = inputs.get("weights")
    if weights is None:
        return -logp.sum()
    return -(weights * logp).sum()


def _ratio(logp: torch.Tensor, inputs: Mapping[str, torch.Tensor], loss: str) -> tuple:
    sampler_logp, advantages = _need(inputs, loss, "logprobs", "advantages")
    return torch.exp(logp - sampler_logp), advantages


def importance_sampling(
    logp: torch.Tensor, inputs: Mapping[str, torch.Tensor], config: Mapping[str, float | str]
) -> torch.Tensor:
    """Policy gradient with an importance weight against the sampler's log-probs."""
    ratio, advantages = _ratio(logp, inputs, "importance_sampling")
    return -(ratio * advantages).sum()


def _clip_bounds(
    inputs: Mapping[str, torch.Tensor], config: Mapping[str, float | str], like: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The (low, high) ratio bounds, per token, once they can clip (else one error naming
    the key): >= 0, finite (``high`` may be ``+inf``: no upper clip) and low <= high.
    Swapped bounds make every ratio the constant ``high`` (zero gradient: nothing trains),
    so they are refused rather than used."""
    bounds = []
    names = []
    for key, default in (
        ("clip_low_threshold", DEFAULT_CLIP_LOW),
        ("clip_high_threshold", DEFAULT_CLIP_HIGH),
    ):
        # +inf as the high bound clips nothing from above (torch.minimum(ratio, inf)), which
        # CISPO setups with only a lower clip use; as the low bound it would clip every ratio
        # to inf. NaN and -inf are refused for both.
        open_high = key == "clip_high_threshold"
        expected = (
            "a ratio bound >= 0, finite or inf (no upper clip)"
            if open_high
            else "a finite ratio bound >= 0"
        )
        if key in inputs:
            bound = inputs[key]
            name = f"loss_fn_inputs[{key!r}]"
            ok = torch.isfinite(bound)
            if open_high:
                ok = ok | torch.isposinf(bound)
            bad = ~ok | (bound < 0)
            if bool(bad.any()):
                at = int(bad.nonzero()[0, 0])
                raise HfsdkError(
                    f"{name}[{at}]={float(bound[at]):g}: expected {expected} "
                    f"(the default bounds are {DEFAULT_CLIP_LOW} / {DEFAULT_CLIP_HIGH})"
                )
            bounds.append(bound)
            names.append(name)
            continue
        value = config.get(key, default)
        if isinstance(value, str):
            raise HfsdkError(f"loss_fn_config[{key!r}]={value!r}: expected a number")
        name = f"loss_fn_config[{key!r}]" if key in config else f"the default {key}"
        number = float(value)
        if not (math.isfinite(number) or (open_high and number == math.inf)) or number < 0:
            raise HfsdkError(
                f"{name}={number:g}: expected {expected} "
                f"(the default bounds are {DEFAULT_CLIP_LOW} / {DEFAULT_CLIP_HIGH})"
            )
        bounds.append(torch.full_like(like, float(value)))
        names.append(name)
    low, high = bounds
    swapped = low > high
    if bool(swapped.any()):
        at = int(swapped.nonzero()[0, 0])
        where = [f"{n}[{at}]" if n.startswith("loss_fn_inputs") else n for n in names]
        raise HfsdkError(
            f"{where[0]}={float(low[at]):g} is above {where[1]}={float(high[at]):g}: expected "
            "low <= high (ratio bounds such as the default "
            f"{DEFAULT_CLIP_LOW} / {DEFAULT_CLIP_HIGH}); swap them"
        )
    return low, high


def ppo(
    logp: torch.Tensor, inputs: Mapping[str, torch.Tensor], config: Mapping[str, float | str]
) -> torch.Tensor:
    """PPO's clipped surrogate objective, negated."""
    ratio, advantages = _ratio(logp, inputs, "ppo")
    low, high = _clip_bounds(inputs, config, ratio)
    clipped = torch.minimum(torch.maximum(ratio, low), high)
    return -torch.minimum(ratio * advantages, clipped * advantages).sum()


def cispo(
    logp: torch.Tensor, inputs: Mapping[str, torch.Tensor], config: Mapping[str, float | str]
) -> torch.Tensor:
    """CISPO: the clipped importance ratio (no gradient) weights ``logp · A``."""
    ratio, advantages = _ratio(logp, inputs, "cispo")
    low, high = _clip_bounds(inputs, config, ratio)
    weight = torch.minimum(torch.maximum(ratio, low), high).detach()
    return -(weight * logp * advantages).sum()


def _number(config: Mapping[str, float | str], key: str, default: float) -> float:
    value = config.get(key, default)
    if isinstance(value, str) or not math.isfinite(float(value)):
        raise HfsdkError(f"loss_fn_config[{key!r}]={value!r}: expected a finite number")
    return float(value)


def dro(
    logp: torch.Tensor, inputs: Mapping[str, torch.Tensor], config: Mapping[str, float | str]
) -> torch.Tensor:
    """DRO: ``logp · A`` with a quadratic penalty on the log-ratio to the sampler, negated."""
    sampler_logp, advantages = _need(inputs, "dro", "logprobs", "advantages")
    beta = _number(config, "beta", DEFAULT_DRO_BETA)
    if beta < 0:
        raise HfsdkError(f"loss_fn_config['beta']={beta}: expected a value >= 0")
    penalty = (logp - sampler_logp) ** 2
    return -(logp * advantages - 0.5 * beta * penalty).sum()


def gspo(
    logp: torch.Tensor, inputs: Mapping[str, torch.Tensor], config: Mapping[str, float | str]
) -> torch.Tensor:
    """GSPO-token: PPO's clipped objective on the sequence's geometric-mean ratio."""
    sampler_logp, advantages, mask = _need(
        inputs, "gspo", "logprobs", "advantages", "sequence_ratio_mask"
    )
    marked = mask != 0
    if not bool(marked.any()):
        raise HfsdkError(
            "loss 'gspo': sequence_ratio_mask marks no position; set it non-zero on the "
            "sampled tokens whose log-ratio forms the sequence ratio"
        )
    log_ratio = (logp.detach() - sampler_logp)[marked].mean()
    # The value of the sequence ratio, the gradient of each token's own log-probability.
    ratio = torch.exp(log_ratio + logp - logp.detach())
    low, high = _clip_bounds(inputs, config, ratio)
    clipped = torch.minimum(torch.maximum(ratio, low), high)
    return -torch.minimum(ratio * advantages, clipped * advantages).sum()


LOSSES: dict[str, LossFn] = {
    "cross_entropy": cross_entropy,
    "importance_sampling": importance_sampling,
    "ppo": ppo,
    "cispo": cispo,
    "dro": dro,
    "gspo": gspo,
}
"""The losses this server computes, by the API's name."""

_CLIP = ("clip_low_threshold", "clip_high_threshold")
_RL = ("target_tokens", "logprobs", "advantages")
INPUTS: dict[str, tuple[str, ...]] = {
    "cross_entropy": ("target_tokens", "weights"),
    "importance_sampling": _RL,
    "ppo": (*_RL, *_CLIP),
    "cispo": (*_RL, *_CLIP),
    "dro": _RL,
    "gspo": (*_RL, "sequence_ratio_mask", *_CLIP),
}
"""The ``loss_fn_inputs`` each loss reads (others are refused, see :func:`check_inputs`).

These are the keys the SDK types (``tinker.types.datum._KEY_TO_TYPE``) and tinker_cookbook
sends: ``target_tokens`` + ``weights`` for its supervised loop and ``forward_backward_custom``,
``target_tokens`` + ``logprobs`` + ``advantages`` for its RL loop (its ``mask`` is removed
before sending)."""

CONFIG: dict[str, tuple[str, ...]] = {
    "cross_entropy": (),
    "importance_sampling": (),
    "ppo": _CLIP,
    "cispo": _CLIP,
    "dro": ("beta",),
    "gspo": _CLIP,
}
"""The ``loss_fn_config`` keys each loss reads (others are refused, see :func:`check_config`)."""


def _unused(kind: str, key: str, loss: str, accepted: tuple[str, ...]) -> str:
    takes = f"it takes {sorted(accepted)}" if accepted else f"it takes no {kind}"
    return (
        f"{kind} key {key!r} is not used by loss {loss!r}; {takes} (check the spelling, or "
        "drop the key)"
    )


def check_inputs(loss: str, keys: Iterable[str]) -> None:
    """Refuse a ``loss_fn_inputs`` key that loss ``loss`` does not read.

    A misspelt key would otherwise be ignored silently (``weight`` would train every token
    at weight 1).
    """
    accepted = INPUTS[loss]
    for key in keys:
        if key not in accepted:
            raise HfsdkError(_unused("loss_fn_inputs", key, loss, accepted))


def check_config(loss: str, config: Mapping[str, float | str]) -> None:
    """Refuse a ``loss_fn_config`` key that loss ``loss`` does not read (after its name).

    A misspelt key would otherwise leave the default in place (``clip_low`` for
    ``clip_low_threshold`` kept the bound at 0.8).
    """
    loss_fn(loss)  # an unknown or unserved loss: that error first
    accepted = CONFIG[loss]
    for key in config:
        if key not in accepted:
            raise HfsdkError(_unused("loss_fn_config", key, loss, accepted))


NOT_IMPLEMENTED = ("stable_reinforce", "custom")
"""Names the SDK lists that this server refuses (one clear error, see :func:`loss_fn`)."""


def loss_fn(name: str) -> LossFn:
    """The loss ``name`` (an :class:`HfsdkError` listing the served ones otherwise)."""
    fn = LOSSES.get(name)
    if fn is None:
        why = "is not implemented by hfsdk serve" if name in NOT_IMPLEMENTED else "is unknown"
        raise HfsdkError(
            f"loss_fn {name!r} {why}; use one of {sorted(LOSSES)} "
            "(forward_backward_custom runs a custom loss client-side)"
        )
    return fn
