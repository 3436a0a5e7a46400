"""The pool's sampler gets the sampled adapter's merged weights, and only when they change;
the pool's share of the base and a datum-less rank's zero loss (sharded serving).

The quick counterpart of ``test_vllm_sampling.py`` (heavy): the same
:class:`PoolSampler` logic on the ``hf`` backend, in process, without the SDK.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch

from hfsdk import HfsdkError
from hfsdk_serve.adapters import AdapterPool, AdapterSpec
from hfsdk_serve.sampling import (
    PoolSampler,
    SampleSpec,
    check_spec,
    sample_seed,
    token_logprobs,
)


@pytest.fixture(scope="module")
def pool(default_model_dir: Path) -> AdapterPool:
    """The tiny model with two adapters whose B is not zero (so they change the model)."""
    pool = AdapterPool(default_model_dir)
    for name, seed in (("first", 1), ("second", 2)):
        pool.add(name, AdapterSpec(rank=4, seed=seed))
        generator = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for key, p in pool.get(name).params.items():
                if "lora_B" in key:
                    p.copy_(torch.randn(p.shape, generator=generator) * 0.05)
        pool.touch(name)
    return pool


def _spec(pool: AdapterPool, **changes: Any) -> SampleSpec:
    values: dict[str, Any] = {
        "prompt": pool.tokenizer.encode("3 + 4 ="),
        "num_samples": 2,
        "max_tokens": 4,
        "temperature": 0.0,
        "top_p": 1.0,
        "top_k": -1,
        "seed": 7,
        "stop_ids": (),
        "prompt_logprobs": False,
    }
    return SampleSpec(**{**values, **changes})


@pytest.mark.parametrize("adapter", ["first", None])
def test_merged_weights_compute_what_the_adapter_does(
    pool: AdapterPool, adapter: str | None
) -> None:
    """A plain HF model loaded with ``merged_weights`` gives the peft model's logits.

    Catches a missing ``alpha / r`` scale, a transposed delta, another adapter's delta or
    a base weight left out (the load is strict).
    """
    from transformers import AutoModelForCausalLM

    merged = dict(pool.merged_weights(adapter))
    plain = AutoModelForCausalLM.from_config(pool.hf_config)
    plain.load_state_dict(merged, strict=True)
    ids = torch.tensor([pool.tokenizer.encode("9 + 8 = 17")])
    with torch.no_grad(), pool.active(adapter):
        expected = pool.peft(input_ids=ids).logits
        got = plain.eval()(input_ids=ids).logits
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)
    if adapter is not None:
        with torch.no_grad(), pool.active(None):
            base = pool.peft(input_ids=ids).logits
        assert (got - base).abs().max() > 1e-3  # the adapter is in the merged weights


def test_the_rollout_reloads_only_when_the_sampled_weights_change(pool: AdapterPool) -> None:
    sampler = PoolSampler(pool, "hf")
    try:
        first, _ = sampler.sample("first", _spec(pool))
        assert sampler.reloads == 1
        sampler.sample("first", _spec(pool, temperature=1.0, num_samples=3))
        assert sampler.reloads == 1  # same adapter, same weights: nothing reloaded
        sampler.sample("second", _spec(pool))
        assert sampler.reloads == 2
        sampler.sample(None, _spec(pool))
        assert sampler.reloads == 3
        # New weights of "first" (as after an optim_step): reloaded, and sampled.
        saved = pool.adapter_state("first")
        try:
            with torch.no_grad():
                for key, p in pool.get("first").params.items():
                    if "lora_B" in key:
                        p.mul_(-3.0)
            pool.touch("first")
            moved, _ = sampler.sample("first", _spec(pool))
            assert sampler.reloads == 4
            # The sampler's log-probs are the pool's teacher-forced ones for the new weights.
            prompt = _spec(pool).prompt
            (forced,) = token_logprobs(pool, "first", [prompt + moved[0].tokens], 1.0)
            torch.testing.assert_close(
                torch.tensor(moved[0].logprobs), forced[len(prompt) - 1 :], rtol=0, atol=1e-5
            )
            assert (moved[0].tokens, moved[0].logprobs) != (first[0].tokens, first[0].logprobs)
        finally:
            pool.load_adapter_state("first", saved)
    finally:
        sampler.close()


def test_a_failed_reload_is_retried_by_the_next_select(
    pool: AdapterPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: select recorded the adapter's weights as the rollout's before the reload ran, so
    # after one that raised every later select skipped it and sampled the old weights.
    sampler = PoolSampler(pool, "hf")
    try:
        reload = sampler.rollout.update_weights
        calls: list[tuple[str | None, int]] = []

        def flaky(source: Any) -> None:
            calls.append((source.adapter, source.weights_version))
            if len(calls) == 1:
                raise RuntimeError("transient reload failure")
            reload(source)

        monkeypatch.setattr(sampler.rollout, "update_weights", flaky)
        with pytest.raises(RuntimeError, match="transient"):
            sampler.select("first")
        assert sampler.reloads == 0
        sampler.select("first")
        want = ("first", pool.version("first"))
        assert calls == [want, want] and sampler.reloads == 1
        sampler.select("first")  # loaded now: nothing to reload
        assert len(calls) == 2
        # A failed reload back to weights loaded before is retried too: the engine's are unknown.
        calls.clear()
        monkeypatch.setattr(sampler.rollout, "update_weights", flaky)
        with pytest.raises(RuntimeError, match="transient"):
            sampler.select("second")
        sampler.select("first")
        assert calls == [("second", pool.version("second")), want]
    finally:
        sampler.close()


def test_seeds_top_k_and_stop_ids_reach_the_rollout(pool: AdapterPool) -> None:
    sampler = PoolSampler(pool, "hf")
    try:
        greedy, _ = sampler.sample("first", _spec(pool, num_samples=1))
        hot = _spec(pool, temperature=2.0, num_samples=6, max_tokens=4)
        draws, _ = sampler.sample("first", hot)
        redraw, _ = sampler.sample("first", hot)
        assert [s.tokens for s in draws] == [s.tokens for s in redraw]  # seeded
        assert len({tuple(s.tokens) for s in draws}) > 1  # sample i has its own seed
        top1, _ = sampler.sample("first", _spec(pool, temperature=2.0, top_k=1, num_samples=3))
        assert all(s.tokens == greedy[0].tokens for s in top1)  # top_k=1 is the argmax
        # The prompt's log-probs come from the rollout and are the pool's forward.
        _, scored = sampler.sample("first", _spec(pool, prompt_logprobs=True))
        prompt = _spec(pool).prompt
        (forced,) = token_logprobs(pool, "first", [prompt], 1.0)
        assert scored is not None and math.isnan(scored[0]) and len(scored) == len(prompt)
        torch.testing.assert_close(torch.tensor(scored[1:]), forced, rtol=0, atol=1e-5)
        stop = greedy[0].tokens[0]
        cut, _ = sampler.sample("first", _spec(pool, num_samples=1, stop_ids=(stop,)))
        assert cut[0].tokens == [stop] and cut[0].stopped
    finally:
        sampler.close()
    assert sample_seed(7, 0) == sample_seed(7, 0) != sample_seed(7, 1) != sample_seed(8, 1)


def test_unknown_and_unservable_rollouts_are_refused(pool: AdapterPool) -> None:
    with pytest.raises(HfsdkError, match=r"unknown rollout backend 'hff'.*did you mean 'hf'"):
        PoolSampler(pool, "hff")


def test_a_rank_without_datums_adds_zero_gradients(pool: AdapterPool) -> None:
    """Under FSDP such a rank still runs one forward and backward (they gather the base);
    its loss is zero and so is every gradient it adds to the sum over ranks."""
    from hfsdk_serve.training import idle_loss

    with pool.active("first", train=True):
        loss = idle_loss(pool)
        loss.backward()
    params = pool.get("first").params.values()
    try:
        assert float(loss) == 0.0
        assert all(p.grad is not None and not p.grad.any() for p in params)
    finally:
        for p in params:
            p.grad = None


def test_an_unsharded_pool_holds_the_whole_base(pool: AdapterPool) -> None:
    """Adapters' tensors are not base weights: the count is the plain HF model's."""
    from transformers import AutoModelForCausalLM

    plain = AutoModelForCausalLM.from_config(pool.hf_config)
    base = sum(p.numel() * p.element_size() for p in plain.parameters())
    assert not pool.sharded and pool.base_storage() == (base, base)


def test_the_generation_configs_eos_ids_end_a_sample(
    default_model_dir: Path, tmp_path: Path
) -> None:
    """A model whose generation_config.json names several EOS ids (Llama-3 instruct's
    end-of-turn) stops at any of them, as a training rollout and HF ``generate`` do."""
    import json
    import shutil

    base = AdapterPool(default_model_dir)
    sampler = PoolSampler(base, "hf")
    try:
        (greedy,), _ = sampler.sample(None, _spec(base, num_samples=1, max_tokens=4))
    finally:
        sampler.close()
    second = greedy.tokens[1]  # a token greedy emits, not the first
    assert second not in (greedy.tokens[0], base.tokenizer.eos_token_id)
    model_dir = tmp_path / "model"
    shutil.copytree(default_model_dir, model_dir)
    config_path = model_dir / "generation_config.json"
    config = json.loads(config_path.read_text())
    config["eos_token_id"] = [base.tokenizer.eos_token_id, second]
    config_path.write_text(json.dumps(config))
    pool = AdapterPool(model_dir)
    sampler = PoolSampler(pool, "hf")
    try:
        (out,), _ = sampler.sample(None, _spec(pool, num_samples=1, max_tokens=4))
    finally:
        sampler.close()
    assert out.tokens == greedy.tokens[:2] and out.stopped


@pytest.mark.parametrize("stop", [10**6, -1])
def test_a_stop_id_outside_the_vocabulary_is_refused_in_one_line(
    pool: AdapterPool, stop: int
) -> None:
    """A vLLM engine would raise it as an internal error; the hf backend would ignore it."""
    with pytest.raises(HfsdkError, match=rf"stop token ids \[{stop}\] are outside the vocab"):
        check_spec(pool, _spec(pool, stop_ids=(stop,)))


def test_a_temperature_below_vllms_epsilon_samples_greedily(pool: AdapterPool) -> None:
    """T=1e-45 would overflow logits / T to inf: NaN log-probs and the last vocabulary id."""
    sampler = PoolSampler(pool, "hf")
    try:
        (greedy,), _ = sampler.sample("first", _spec(pool, num_samples=1))
        (tiny,), _ = sampler.sample("first", _spec(pool, num_samples=1, temperature=1e-45))
    finally:
        sampler.close()
    assert all(math.isfinite(lp) for lp in tiny.logprobs)
    assert tiny.tokens == greedy.tokens and tiny.logprobs == greedy.logprobs
