"""The built-in losses' numbers and gradients: on hand-made inputs, and through the SDK."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch
from tinker import types

from hfsdk import HfsdkError
from hfsdk_serve.losses import DEFAULT_DRO_BETA, loss_fn


def _inputs(sampler: list[float], adv: list[float]) -> dict[str, torch.Tensor]:
    return {"logprobs": torch.tensor(sampler), "advantages": torch.tensor(adv)}


def test_cross_entropy_is_weighted_negative_log_likelihood() -> None:
    logp = torch.tensor([-1.0, -2.0, -3.0])
    assert loss_fn("cross_entropy")(logp, {"weights": torch.tensor([0.0, 1.0, 0.5])}, {}) == 3.5
    assert loss_fn("cross_entropy")(logp, {}, {}) == 6.0


def test_importance_sampling_gradient_is_ratio_times_advantage() -> None:
    logp = torch.tensor([-1.0, -2.0], requires_grad=True)
    inputs = _inputs([-1.5, -2.0], [2.0, -1.0])
    loss = loss_fn("importance_sampling")(logp, inputs, {})
    loss.backward()
    ratio = torch.exp(torch.tensor([0.5, 0.0]))
    assert torch.allclose(loss, -(ratio * torch.tensor([2.0, -1.0])).sum())
    assert torch.allclose(logp.grad, -ratio * torch.tensor([2.0, -1.0]))


def test_ppo_clips_the_ratio_where_the_objective_would_grow() -> None:
    # ratio e^0.5 = 1.65 with A > 0: clipped at 1.2 (no gradient); ratio e^-0.5 = 0.61 with
    # A > 0: not clipped (min picks the unclipped term).
    logp = torch.tensor([0.0, 0.0], requires_grad=True)
    inputs = _inputs([-0.5, 0.5], [1.0, 1.0])
    loss = loss_fn("ppo")(logp, inputs, {})
    loss.backward()
    low = torch.exp(torch.tensor(-0.5))
    assert torch.allclose(loss, -(1.2 + low))
    assert torch.allclose(logp.grad, torch.tensor([0.0, -float(low)]))
    # loss_fn_config bounds apply; a datum's per-token bounds win over them.
    wide = loss_fn("ppo")(logp.detach(), inputs, {"clip_high_threshold": 2.0})
    assert torch.allclose(wide, -(torch.exp(torch.tensor(0.5)) + low))
    per_token = {
        **inputs,
        "clip_low_threshold": torch.full((2,), 0.9),
        "clip_high_threshold": torch.full((2,), 1.1),
    }
    assert torch.allclose(loss_fn("ppo")(logp.detach(), per_token, {}), -(1.1 + low))


def test_cispo_weights_logp_by_the_clipped_ratio_without_its_gradient() -> None:
    logp = torch.tensor([-1.0], requires_grad=True)
    loss = loss_fn("cispo")(logp, _inputs([-2.0], [3.0]), {})  # ratio e = 2.72 -> 1.2
    loss.backward()
    assert torch.allclose(loss, torch.tensor(1.2 * 3.0))
    assert torch.allclose(logp.grad, torch.tensor([-1.2 * 3.0]))


def test_dro_is_reinforce_with_a_quadratic_penalty_to_the_sampler() -> None:
    # logp - q = [0.5, 0]: the penalty acts on the first token only.
    logp = torch.tensor([-1.0, -2.0], requires_grad=True)
    loss = loss_fn("dro")(logp, _inputs([-1.5, -2.0], [2.0, -1.0]), {"beta": 0.5})
    loss.backward()
    # -[(-1)(2) - 0.25 * 0.25 + (-2)(-1)] = 0.0625; d/dlogp = -A + beta (logp - q).
    assert torch.allclose(loss, torch.tensor(0.0625))
    assert torch.allclose(logp.grad, torch.tensor([-2.0 + 0.25, 1.0]))
    default = loss_fn("dro")(logp.detach(), _inputs([-1.5, -2.0], [2.0, -1.0]), {})
    # float32: -2 + 2 cancels around the small penalty, so compare to float32 rounding of 2.
    assert torch.allclose(default, torch.tensor(0.5 * DEFAULT_DRO_BETA * 0.25), atol=1e-6)
    with pytest.raises(HfsdkError, match=r"loss_fn_config\['beta'\]=-1.0: expected a value >= 0"):
        loss_fn("dro")(logp.detach(), _inputs([-1.5, -2.0], [2.0, -1.0]), {"beta": -1.0})


def _gspo_inputs(adv: list[float]) -> dict[str, torch.Tensor]:
    # Token log-ratios 0.2 and 0.4 on the two masked tokens (sequence ratio e^0.3 = 1.35);
    # the third position (a prompt token, advantage 0) is outside the mask.
    return {
        "logprobs": torch.tensor([-1.2, -2.4, 0.0]),
        "advantages": torch.tensor(adv),
        "sequence_ratio_mask": torch.tensor([1.0, 1.0, 0.0]),
    }


def test_gspo_uses_one_sequence_ratio_with_each_tokens_own_gradient() -> None:
    seq = math.exp(0.3)
    logp = torch.tensor([-1.0, -2.0, -0.5], requires_grad=True)
    # Unclipped (high bound 2): loss -s * sum(A); each token's gradient is -s * A_t (a
    # token-level ratio would give e^0.2 and e^0.4 instead).
    loss = loss_fn("gspo")(logp, _gspo_inputs([1.0, 1.0, 0.0]), {"clip_high_threshold": 2.0})
    loss.backward()
    assert torch.allclose(loss, torch.tensor(-2 * seq))
    assert torch.allclose(logp.grad, torch.tensor([-seq, -seq, 0.0]))
    # Default bounds: s = 1.35 > 1.2 with A > 0 -> the whole sequence is clipped, no gradient.
    logp.grad = None
    clipped = loss_fn("gspo")(logp, _gspo_inputs([1.0, 1.0, 0.0]), {})
    clipped.backward()
    assert torch.allclose(clipped, torch.tensor(-2 * 1.2))
    assert torch.equal(logp.grad, torch.zeros(3))
    # A < 0: min picks the unclipped s * A (the pessimistic side), so the gradient flows.
    logp.grad = None
    negative = loss_fn("gspo")(logp, _gspo_inputs([-1.0, -1.0, 0.0]), {})
    negative.backward()
    assert torch.allclose(negative, torch.tensor(2 * seq))
    assert torch.allclose(logp.grad, torch.tensor([seq, seq, 0.0]))


def test_gspo_needs_a_mask_that_marks_something() -> None:
    logp = torch.tensor([-1.0, -2.0, -0.5])
    inputs = _gspo_inputs([1.0, 1.0, 0.0])
    with pytest.raises(HfsdkError, match=r"lacks \['sequence_ratio_mask'\]"):
        loss_fn("gspo")(logp, {k: v for k, v in inputs.items() if k != "sequence_ratio_mask"}, {})
    with pytest.raises(HfsdkError, match="sequence_ratio_mask marks no position"):
        loss_fn("gspo")(logp, {**inputs, "sequence_ratio_mask": torch.zeros(3)}, {})


def test_unknown_and_unserved_names() -> None:
    with pytest.raises(HfsdkError, match="'stable_reinforce' is not implemented by hfsdk serve"):
        loss_fn("stable_reinforce")
    with pytest.raises(HfsdkError, match="'xent' is unknown; use one of"):
        loss_fn("xent")


# -- through the SDK and the server ---------------------------------------------------------


def _sdk_datum(tokens: list[int], **inputs: Any) -> types.Datum:
    return types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={"target_tokens": tokens[1:], **inputs},
    )


@pytest.fixture
def rl_client(served: Any, service_client: Any) -> Any:
    return service_client.create_lora_training_client(
        base_model=str(served.model_dir), rank=4, seed=11
    ).result()


def _current_logprobs(client: Any, tokens: list[int]) -> np.ndarray:
    out = client.forward([_sdk_datum(tokens)], "cross_entropy").result()
    return out.loss_fn_outputs[0]["logprobs"].to_numpy().astype(np.float64)


def test_dro_loss_through_the_sdk(served: Any, rl_client: Any) -> None:
    """``forward(..., "dro", {"beta": b})``'s ``loss:sum`` equals the formula on its log-probs.

    Catches a missing or sign-flipped penalty, beta not read from loss_fn_config (the
    SDK sends it as ``loss_fn_config_v2``), and a default beta that differs from the docs'.
    """
    tokens = served.tokenizer.encode("3 + 5 = 8")
    lp = _current_logprobs(rl_client, tokens)
    n = len(lp)
    gap = np.linspace(-0.6, 0.9, n)  # logp - sampler_logp per token
    adv = np.linspace(1.0, -0.5, n)
    datum = _sdk_datum(
        tokens,
        logprobs=(lp - gap).astype(np.float32),
        advantages=adv.astype(np.float32),
    )
    for config, beta in (({"beta": 0.7}, 0.7), (None, DEFAULT_DRO_BETA)):
        out = rl_client.forward([datum], "dro", config).result()
        got_lp = out.loss_fn_outputs[0]["logprobs"].to_numpy().astype(np.float64)
        q = (lp - gap).astype(np.float32).astype(np.float64)
        expected = -np.sum(got_lp * adv.astype(np.float32) - 0.5 * beta * (got_lp - q) ** 2)
        assert out.metrics["loss:sum"] == pytest.approx(expected, rel=1e-5, abs=1e-5)
    # The penalty matters: a larger beta gives a larger loss on the same log-probs.
    big = rl_client.forward([datum], "dro", {"beta": 5.0}).result().metrics["loss:sum"]
    assert big > rl_client.forward([datum], "dro", {"beta": 0.7}).result().metrics["loss:sum"]


def test_gspo_through_the_sdk_clips_whole_sequences(served: Any, rl_client: Any) -> None:
    """GSPO's loss value, and its gradient effect against PPO's, through the real SDK.

    The sampler log-probs put the sequence ratio at e^0.3 (above the 1.2 bound) while one
    token's own ratio is e^-0.1 (inside the bounds), advantages positive: PPO clips token
    by token and still has a gradient from that token; GSPO clips the whole sequence, so
    its gradient norm is exactly 0. Catches a token-level ratio, a mask that is ignored,
    and a sequence ratio that carries the mean's gradient.
    """
    tokens = served.tokenizer.encode("3 + 5 = 8")
    lp = _current_logprobs(rl_client, tokens)
    n = len(lp)
    mask = np.zeros(n, dtype=np.float32)
    mask[n // 2 :] = 1.0  # the "sampled" half
    gap = np.where(mask > 0, 0.3, -2.0)
    gap[n // 2] = -0.1
    gap[n // 2 + 1 :] = (0.3 * mask.sum() + 0.1) / (mask.sum() - 1)  # masked mean stays 0.3
    adv = mask.copy()  # advantage 1 on sampled tokens, 0 on the prompt
    inputs = {
        "logprobs": (lp - gap).astype(np.float32),
        "advantages": adv,
        "sequence_ratio_mask": mask,
    }
    datum = _sdk_datum(tokens, **inputs)

    wide = rl_client.forward([datum], "gspo", {"clip_high_threshold": 3.0}).result()
    got_lp = wide.loss_fn_outputs[0]["logprobs"].to_numpy().astype(np.float64)
    q = inputs["logprobs"].astype(np.float64)
    seq = math.exp(float(np.mean((got_lp - q)[mask > 0])))
    assert seq == pytest.approx(math.exp(0.3), rel=1e-4)
    assert wide.metrics["loss:sum"] == pytest.approx(-seq * adv.sum(), rel=1e-5)

    rl_client.forward_backward([datum], "gspo").result()
    gspo_norm = rl_client.optim_step(types.AdamParams(learning_rate=1e-3)).result()
    assert gspo_norm.metrics["grad_norm:mean"] == 0.0
    # ppo reads no sequence_ratio_mask (it would be refused as a key ppo does not use).
    ppo_inputs = {k: v for k, v in inputs.items() if k != "sequence_ratio_mask"}
    rl_client.forward_backward([_sdk_datum(tokens, **ppo_inputs)], "ppo").result()
    ppo_norm = rl_client.optim_step(types.AdamParams(learning_rate=1e-3)).result()
    assert ppo_norm.metrics["grad_norm:mean"] > 0.0


def test_keys_the_loss_does_not_use_are_refused(served: Any, rl_client: Any) -> None:
    """A misspelt ``loss_fn_inputs`` or ``loss_fn_config`` key is one line naming the accepted
    ones, while the keys the SDK and tinker_cookbook send still train.

    Catches ``weight`` for ``weights`` training every token at weight 1, and ``clip_low`` for
    ``clip_low_threshold`` silently keeping the default bound.
    """
    import tinker

    tokens = served.tokenizer.encode("3 + 5 = 8")
    zeros = np.zeros(len(tokens) - 1, dtype=np.float32)  # the SDK types unknown keys' arrays
    with pytest.raises(
        tinker.RequestFailedError,
        match=r"datum 0: loss_fn_inputs key 'weight' is not used by loss 'cross_entropy'; "
        r"it takes \['target_tokens', 'weights'\]",
    ):
        rl_client.forward([_sdk_datum(tokens, weight=zeros)], "cross_entropy").result()
    ppo_datum = _sdk_datum(tokens, logprobs=zeros, advantages=zeros)
    with pytest.raises(
        tinker.RequestFailedError,
        match=r"loss_fn_config key 'clip_low' is not used by loss 'ppo'; it takes "
        r"\['clip_high_threshold', 'clip_low_threshold'\]",
    ):
        rl_client.forward([ppo_datum], "ppo", {"clip_low": 0.5}).result()
    with pytest.raises(tinker.RequestFailedError, match="it takes no loss_fn_config"):
        rl_client.forward([_sdk_datum(tokens)], "cross_entropy", {"beta": 0.1}).result()
    with pytest.raises(tinker.RequestFailedError, match="key 'clip_low_threshold' is not used"):
        bounded = _sdk_datum(tokens, logprobs=zeros, advantages=zeros, clip_low_threshold=zeros)
        rl_client.forward([bounded], "dro").result()
    # The names the losses read still go through.
    assert rl_client.forward([ppo_datum], "ppo", {"clip_low_threshold": 0.5}).result()
    assert rl_client.forward([_sdk_datum(tokens, weights=zeros)], "cross_entropy").result()
    assert rl_client.forward([ppo_datum], "dro", {"beta": 0.1}).result()


@pytest.mark.parametrize("loss", ["ppo", "cispo", "gspo"])
def test_an_infinite_high_clip_bound_means_no_upper_clip(loss: str) -> None:
    """``clip_high_threshold=inf`` (CISPO setups with only a lower clip) was refused as not
    finite, though torch.minimum(ratio, inf) clips nothing from above: it works again, from
    loss_fn_config or per token, and matches a bound no ratio here reaches."""
    logp = torch.tensor([0.0, 0.0], requires_grad=True)
    inputs = {**_inputs([-0.5, 0.5], [1.0, 1.0]), "sequence_ratio_mask": torch.ones(2)}
    fn = loss_fn(loss)
    wide = fn(logp, inputs, {"clip_high_threshold": 1e6})
    unbounded = fn(logp, inputs, {"clip_high_threshold": math.inf})
    assert torch.isfinite(unbounded) and torch.equal(unbounded, wide)
    per_token = {**inputs, "clip_high_threshold": torch.tensor([math.inf, math.inf])}
    (grad,) = torch.autograd.grad(fn(logp, per_token, {}), logp)
    assert torch.isfinite(grad).all()


@pytest.mark.parametrize("loss", ["ppo", "cispo", "gspo"])
def test_clip_bounds_that_cannot_clip_are_refused(loss: str) -> None:
    """The bounds are ratio bounds (the API's default 0.8 / 1.2). Swapped ones made every
    clipped ratio a constant (zero gradient: nothing trained); negative or NaN ones were
    used as given. Each is refused naming the key, from loss_fn_config or the datum."""
    logp = torch.tensor([0.0, 0.0], requires_grad=True)
    inputs = {**_inputs([-0.5, 0.5], [1.0, 1.0]), "sequence_ratio_mask": torch.ones(2)}
    fn = loss_fn(loss)
    swapped = {"clip_low_threshold": 1.2, "clip_high_threshold": 0.8}
    with pytest.raises(
        HfsdkError,
        match=r"loss_fn_config\['clip_low_threshold'\]=1.2 is above "
        r"loss_fn_config\['clip_high_threshold'\]=0.8: expected low <= high",
    ):
        fn(logp, inputs, swapped)
    with pytest.raises(HfsdkError, match=r"loss_fn_config\['clip_low_threshold'\]=-0.5"):
        fn(logp, inputs, {"clip_low_threshold": -0.5})
    with pytest.raises(HfsdkError, match=r"loss_fn_config\['clip_high_threshold'\]=nan"):
        fn(logp, inputs, {"clip_high_threshold": math.nan})
    per_token = {**inputs, "clip_low_threshold": torch.tensor([0.8, 1.5])}
    with pytest.raises(
        HfsdkError, match=r"loss_fn_inputs\['clip_low_threshold'\]\[1\]=1.5 is above .*=1.2"
    ):
        fn(logp, per_token, {})
    per_token = {**inputs, "clip_high_threshold": torch.tensor([1.2, -math.inf])}
    with pytest.raises(HfsdkError, match=r"loss_fn_inputs\['clip_high_threshold'\]\[1\]=-inf"):
        fn(logp, per_token, {})
    with pytest.raises(HfsdkError, match=r"loss_fn_config\['clip_low_threshold'\]=inf"):
        fn(logp, inputs, {"clip_low_threshold": math.inf})  # every ratio would clip to inf
    # Equal bounds and a zero lower bound are valid clips.
    assert torch.isfinite(fn(logp, inputs, {"clip_low_threshold": 0.0, "clip_high_threshold": 0.0}))


def test_swapped_clip_bounds_are_refused_through_the_sdk(served: Any, rl_client: Any) -> None:
    import tinker

    tokens = served.tokenizer.encode("3 + 5 = 8")
    zeros = np.zeros(len(tokens) - 1, dtype=np.float32)
    datum = _sdk_datum(tokens, logprobs=zeros, advantages=np.ones_like(zeros))
    swapped = {"clip_low_threshold": 1.2, "clip_high_threshold": 0.8}
    with pytest.raises(tinker.RequestFailedError, match="expected low <= high") as err:
        rl_client.forward_backward([datum], "ppo", swapped).result()
    assert "Traceback" not in str(err.value)
