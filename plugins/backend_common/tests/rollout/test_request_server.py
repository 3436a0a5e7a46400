"""Continuous batching of single requests equals decoding each request alone.

A tiny random Llama (peaked logits: no near-ties) decoded by ``TPDecoder``:
each request served among many in flight, arriving at staggered times, gets
the tokens it gets alone and that ``TPDecoder.generate`` gives on its
prompt; seeded sampling is reproducible whatever else is in flight; stop
tokens end a request; log-probs equal a teacher-forced forward of the HF model.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest
import torch

from hfsdk import GenerationRequest, GenerationResult, HfsdkError
from hfsdk_backend_common.hybrid.decoder import DecoderShape, TPDecoder
from hfsdk_backend_common.hybrid.llama_format import hf_llama_shape, hf_llama_to_megatron
from hfsdk_backend_common.rollout.request_server import RequestServer

VOCAB, EOS = 96, 1


@pytest.fixture(scope="module")
def hf() -> Any:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
        eos_token_id=EOS, pad_token_id=0,
    )  # fmt: skip
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():
        for param in model.parameters():
            if param.dim() == 2:
                param.normal_(0.0, 0.2)
    return model


def _decoder(hf: Any, dtype: torch.dtype = torch.float32) -> TPDecoder:
    state = {name: p.detach().to(dtype) for name, p in hf.named_parameters()}
    weights = hf_llama_to_megatron(state, hf_llama_shape(hf.config))
    return TPDecoder(weights, DecoderShape.from_hf_config(hf.config), tg=1, tp_rank=0)


def _prompts(count: int, seed: int = 1) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(2, VOCAB) for _ in range(rng.randrange(3, 12))] for _ in range(count)]


def _alone(decoder: TPDecoder, prompt: list[int], width: int) -> list[int]:
    """``TPDecoder.generate`` on the one prompt: tokens up to and including the first EOS."""
    out = decoder.generate(
        torch.tensor([prompt]), torch.ones(1, len(prompt), dtype=torch.long),
        max_new_tokens=width, eos_ids=[EOS], pad_id=0, greedy=True,
    )[0].tolist()  # fmt: skip
    return out[: out.index(EOS) + 1] if EOS in out else out


def _serve(server: RequestServer, requests: list[GenerationRequest],
           delays: list[float] | None = None) -> list[GenerationResult]:  # fmt: skip
    async def one(request: GenerationRequest, delay: float) -> GenerationResult:
        await asyncio.sleep(delay)
        return await server.generate(request)

    async def main() -> list[GenerationResult]:
        return await asyncio.gather(
            *(one(r, d) for r, d in zip(requests, delays or [0.0] * len(requests), strict=True))
        )

    return asyncio.run(main())


def _server(decoder: TPDecoder, **kwargs: Any) -> RequestServer:
    return RequestServer(decoder, eos_ids=[EOS], device=torch.device("cpu"), **kwargs)


def test_greedy_requests_in_flight_equal_generate_alone(hf: Any) -> None:
    decoder = _decoder(hf)
    prompts = _prompts(10)
    widths = [4 + i % 5 for i in range(10)]
    expected = [_alone(decoder, p, w) for p, w in zip(prompts, widths, strict=True)]
    assert len({tuple(e) for e in expected}) > 5  # the prompts decode differently
    requests = [GenerationRequest(prompt_ids=p, max_new_tokens=w, greedy=True)
                for p, w in zip(prompts, widths, strict=True)]  # fmt: skip
    server = _server(decoder)
    # Staggered arrival: requests join while others are mid-decode.
    results = _serve(server, requests, delays=[0.003 * i for i in range(10)])
    for result, want, width in zip(results, expected, widths, strict=True):
        assert list(result.token_ids) == want
        assert result.finish_reason == ("stop" if want[-1] == EOS else "length")
        assert len(result.token_ids) <= width
    # Batched for real: far fewer decode steps than tokens, several requests per step.
    assert server.stats.peak_batch > 1
    assert server.stats.steps < server.stats.tokens
    assert server.stats.tokens == sum(len(r.token_ids) for r in results)
    server.close()


def test_more_requests_than_slots_wait_for_a_free_one(hf: Any) -> None:
    decoder = _decoder(hf)
    prompts = _prompts(5, seed=3)
    expected = [_alone(decoder, p, 6) for p in prompts]
    server = _server(decoder, max_batch=2)
    results = _serve(server, [GenerationRequest(prompt_ids=p, max_new_tokens=6, greedy=True)
                              for p in prompts])  # fmt: skip
    assert [list(r.token_ids) for r in results] == expected
    assert server.stats.peak_batch == 2
    server.close()


def test_log_probs_equal_a_teacher_forced_forward(hf: Any) -> None:
    decoder = _decoder(hf)
    prompts = _prompts(4, seed=5)
    requests = [
        GenerationRequest(prompt_ids=prompts[0], max_new_tokens=6, greedy=True),
        GenerationRequest(prompt_ids=prompts[1], max_new_tokens=6, temperature=0.7, seed=1),
        GenerationRequest(prompt_ids=prompts[2], max_new_tokens=6, temperature=1.3, seed=2,
                          top_p=0.9),
        GenerationRequest(prompt_ids=prompts[3], max_new_tokens=6, temperature=1.0, seed=3),
    ]  # fmt: skip
    results = _serve(_server(decoder), requests)
    for request, result in zip(requests, results, strict=True):
        ids = torch.tensor([[*request.prompt_ids, *result.token_ids]])
        with torch.no_grad():
            logits = hf(input_ids=ids).logits[0].float()
        start = len(request.prompt_ids) - 1
        scaled = logits[start : start + len(result.token_ids)] / request.logprob_temperature
        want = scaled.log_softmax(-1).gather(-1, torch.tensor(result.token_ids)[:, None])[:, 0]
        torch.testing.assert_close(torch.tensor(result.logprobs), want, atol=1e-4, rtol=1e-4)
        assert all(lp < 0 for lp in result.logprobs)


def test_seeded_sampling_is_reproducible_whatever_is_in_flight(hf: Any) -> None:
    decoder = _decoder(hf)
    prompt = _prompts(1, seed=7)[0]
    request = GenerationRequest(prompt_ids=prompt, max_new_tokens=10, temperature=1.5, seed=42)
    alone = _serve(_server(decoder), [request])[0]
    crowd = [GenerationRequest(prompt_ids=p, max_new_tokens=10, temperature=1.5, seed=i)
             for i, p in enumerate(_prompts(6, seed=8))]  # fmt: skip
    together = _serve(_server(decoder), [*crowd[:3], request, *crowd[3:]],
                      delays=[0.0, 0.002, 0.004, 0.001, 0.0, 0.003, 0.005])  # fmt: skip
    assert together[3].token_ids == alone.token_ids
    torch.testing.assert_close(torch.tensor(together[3].logprobs), torch.tensor(alone.logprobs))
    other_seed = _serve(_server(decoder), [attrs_replace(request, seed=43)])[0]
    assert other_seed.token_ids != alone.token_ids  # the seed is what decides the draw
    greedy = _alone(decoder, prompt, 10)
    assert list(alone.token_ids) != greedy  # at temperature 1.5 the draw is not the argmax


def attrs_replace(request: GenerationRequest, **changes: Any) -> GenerationRequest:
    import attrs

    return attrs.evolve(request, **changes)


def test_a_stop_token_ends_the_request_and_is_kept(hf: Any) -> None:
    decoder = _decoder(hf)
    prompts = _prompts(8, seed=11)
    greedy = [_alone(decoder, p, 8) for p in prompts]
    # A prompt whose greedy output has a non-EOS token at position 2 not seen before it.
    prompt, tokens = next((p, t) for p, t in zip(prompts, greedy, strict=True)
                          if len(t) > 3 and t[2] != EOS and t[2] not in t[:2])  # fmt: skip
    stop = tokens[2]
    results = _serve(_server(decoder), [
        GenerationRequest(prompt_ids=prompt, max_new_tokens=8, greedy=True, stop_token_ids=[stop]),
        GenerationRequest(prompt_ids=prompt, max_new_tokens=8, greedy=True),
    ])  # fmt: skip
    assert list(results[0].token_ids) == tokens[:3] and results[0].finish_reason == "stop"
    assert list(results[1].token_ids) == tokens  # the other request does not see that stop


def test_bfloat16_greedy_equals_generate_in_bfloat16(hf: Any) -> None:
    decoder = _decoder(hf, torch.bfloat16)
    prompts = _prompts(3, seed=13)
    expected = [_alone(decoder, p, 6) for p in prompts]
    results = _serve(_server(decoder), [GenerationRequest(prompt_ids=p, max_new_tokens=6,
                                                          greedy=True) for p in prompts])  # fmt: skip
    # Alone the arithmetic is the same as generate's; batched, bf16 rounding may differ.
    alone = [_serve(_server(decoder), [GenerationRequest(prompt_ids=p, max_new_tokens=6,
                                                         greedy=True)])[0] for p in prompts]  # fmt: skip
    assert [list(r.token_ids) for r in alone] == expected
    agree = sum(list(r.token_ids) == e for r, e in zip(results, expected, strict=True))
    assert agree >= 2


def test_a_closed_server_refuses_requests(hf: Any) -> None:
    server = _server(_decoder(hf))
    server.close()
    with pytest.raises(HfsdkError, match="closed"):
        _serve(server, [GenerationRequest(prompt_ids=[3, 4], max_new_tokens=2)])


def test_a_prompt_id_outside_the_vocabulary_is_refused_alone(hf: Any) -> None:
    # It decoded from a zero embedding without error; the one request fails, not the server.
    server = _server(_decoder(hf))
    with pytest.raises(HfsdkError, match=rf"token id {VOCAB + 3} in the prompt is outside"):
        _serve(server, [GenerationRequest(prompt_ids=[3, VOCAB + 3], max_new_tokens=2)])
    [result] = _serve(server, [GenerationRequest(prompt_ids=[3, 4], max_new_tokens=2)])
    assert len(result.token_ids) >= 1


def test_requests_are_validated() -> None:
    with pytest.raises(HfsdkError, match="empty"):
        GenerationRequest(prompt_ids=[], max_new_tokens=2)
    with pytest.raises(ValueError):
        GenerationRequest(prompt_ids=[1], max_new_tokens=0)
    with pytest.raises(HfsdkError, match="log-probs"):
        GenerationResult(token_ids=[1, 2], logprobs=[0.0], finish_reason="stop")


def test_top_k_cuts_each_requests_own_draw(hf: Any) -> None:
    """``top_k=1`` at a high temperature is the argmax; a wider cut still draws; the log-probs
    stay the full-vocabulary ones (the cut is not renormalised into them)."""
    decoder = _decoder(hf)
    prompt = _prompts(1, seed=17)[0]
    greedy = _alone(decoder, prompt, 8)
    hot = [GenerationRequest(prompt_ids=prompt, max_new_tokens=8, temperature=3.0, seed=s,
                             top_k=k) for s in range(4) for k in (1, 0)]  # fmt: skip
    results = _serve(_server(decoder), hot)
    cut, free = results[0::2], results[1::2]
    assert all(list(r.token_ids) == greedy for r in cut)
    assert any(list(r.token_ids) != greedy for r in free)
    (forced,) = [torch.log_softmax(hf(torch.tensor([prompt + greedy])).logits[0, :-1] / 3.0, -1)]
    expected = forced[len(prompt) - 1 :].gather(1, torch.tensor(greedy)[:, None])[:, 0]
    torch.testing.assert_close(torch.tensor(cut[0].logprobs), expected.detach(), atol=1e-4, rtol=0)


def test_prompt_logprobs_are_the_prefills_teacher_forced_ones(hf: Any) -> None:
    """Asked for, a request's prompt log-probs (temperature 1) equal the HF model's forward;
    the other requests of the same prefill get none."""
    decoder = _decoder(hf)
    prompts = _prompts(3, seed=19)  # different lengths: the prefill is right-padded
    results = _serve(_server(decoder), [
        GenerationRequest(prompt_ids=p, max_new_tokens=2, temperature=2.0, seed=1,
                          prompt_logprobs=i != 1) for i, p in enumerate(prompts)
    ])  # fmt: skip
    assert results[1].prompt_logprobs is None
    for i in (0, 2):
        ids = torch.tensor([prompts[i]])
        with torch.no_grad():
            logp = torch.log_softmax(hf(ids).logits[0, :-1], -1)
        expected = logp.gather(1, ids[0, 1:, None])[:, 0]
        torch.testing.assert_close(torch.tensor(results[i].prompt_logprobs), expected,
                                   atol=1e-4, rtol=0)  # fmt: skip


def test_a_step_reads_its_tokens_back_once_whatever_the_batch(
    hf: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Picking the tokens of a step reads the device once for all its rows (on a GPU each
    read is a host sync), not twice per row; greedy and sampled rows alike."""
    steps: list[list[int]] = []  # per ``_take`` call: [its rows, the device reads it made]
    inside = [False]
    take, item, tolist = RequestServer._take, torch.Tensor.item, torch.Tensor.tolist

    def counted(read: Any) -> Any:
        def wrapper(self: torch.Tensor, *args: Any) -> Any:
            if inside[0]:
                steps[-1][1] += 1
            return read(self, *args)

        return wrapper

    def counting_take(self: RequestServer, entries: list[Any], logits: torch.Tensor) -> None:
        steps.append([len(entries), 0])
        inside[0] = True
        try:
            take(self, entries, logits)
        finally:
            inside[0] = False

    monkeypatch.setattr(torch.Tensor, "item", counted(item))
    monkeypatch.setattr(torch.Tensor, "tolist", counted(tolist))
    monkeypatch.setattr(RequestServer, "_take", counting_take)
    requests = [
        GenerationRequest(prompt_ids=p, max_new_tokens=6, greedy=i % 2 == 0, seed=i)
        for i, p in enumerate(_prompts(6))
    ]
    _serve(_server(_decoder(hf)), requests)
    assert max(rows for rows, _ in steps) > 1
    assert all(reads == 1 for _, reads in steps), steps


def _in_flight_then(server: RequestServer, good: list[GenerationRequest],
                    late: GenerationRequest) -> list[Any]:  # fmt: skip
    """``good`` in flight, then ``late`` sent while they decode: every result or error."""

    async def main() -> list[Any]:
        tasks = [asyncio.create_task(server.generate(r)) for r in good]
        while server.stats.steps < 2:  # the good requests are active, mid-decode
            await asyncio.sleep(0.001)
        tasks.append(asyncio.create_task(server.generate(late)))
        return await asyncio.gather(*tasks, return_exceptions=True)

    return asyncio.run(main())


def test_a_request_beyond_the_models_positions_is_refused_alone(hf: Any) -> None:
    # It reserved its whole length in the shared cache: an absurd allocation that failed
    # every request in flight with the allocator's error.
    decoder = _decoder(hf)
    prompts = _prompts(3, seed=23)
    expected = [_alone(decoder, p, 20) for p in prompts]
    server = _server(decoder, max_positions=128)
    good = [GenerationRequest(prompt_ids=p, max_new_tokens=20, greedy=True) for p in prompts]
    late = GenerationRequest(prompt_ids=[5, 6, 7], max_new_tokens=126, greedy=True)
    *results, refused = _in_flight_then(server, good, late)
    assert [list(r.token_ids) for r in results] == expected
    assert isinstance(refused, HfsdkError)
    assert "3 prompt tokens + 126 new tokens = 129 positions" in str(refused)
    assert "at most 128" in str(refused) and "\n" not in str(refused)
    # At the limit exactly it is served.
    at_limit = GenerationRequest(prompt_ids=[5, 6, 7], max_new_tokens=125, greedy=True)
    [result] = _serve(server, [at_limit])
    assert len(result.token_ids) >= 1
    server.close()


def test_a_failed_prefill_fails_only_its_joiners(hf: Any) -> None:
    # With no limit the huge request's reservation fails in the step: the requests already
    # decoding go on, the server stays usable.
    decoder = _decoder(hf)
    prompts = _prompts(3, seed=29)
    expected = [_alone(decoder, p, 20) for p in prompts]
    server = _server(decoder)
    good = [GenerationRequest(prompt_ids=p, max_new_tokens=20, greedy=True) for p in prompts]
    late = GenerationRequest(prompt_ids=[5, 6, 7], max_new_tokens=10**12, greedy=True)
    *results, failed = _in_flight_then(server, good, late)
    assert isinstance(failed, RuntimeError)
    assert [list(r.token_ids) for r in results] == expected
    [again] = _serve(server, [GenerationRequest(prompt_ids=prompts[0], max_new_tokens=20,
                                                greedy=True)])  # fmt: skip
    assert list(again.token_ids) == expected[0]
    server.close()


def test_a_cache_growth_that_fails_partway_keeps_the_cache_as_it_was(
    hf: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Out of memory after some layers grew: every layer keeps its old shape and contents."""
    cache = _server(_decoder(hf)).cache
    cache.reserve(2, 8)
    for layer in cache.layers:
        cache._keys[layer].fill_(float(layer + 1))
    zeros, calls = torch.zeros, [0]

    def failing_zeros(*args: Any, **kwargs: Any) -> torch.Tensor:
        calls[0] += 1
        if calls[0] == 3:
            raise RuntimeError("out of memory")
        return zeros(*args, **kwargs)

    monkeypatch.setattr(torch, "zeros", failing_zeros)
    with pytest.raises(RuntimeError, match="out of memory"):
        cache.reserve(4, 32)
    monkeypatch.setattr(torch, "zeros", zeros)
    assert (cache.slots, cache.capacity) == (2, 8)
    for layer in cache.layers:
        assert cache._keys[layer].shape[0::2] == (2, 8) == cache._values[layer].shape[0::2]
        assert bool((cache._keys[layer] == layer + 1).all())
    cache.reserve(4, 32)  # grows from a consistent state
    assert cache._keys[cache.layers[0]].shape[0::2] == (4, 32)
    assert bool((cache._keys[cache.layers[-1]][:2, :, :8] == cache.layers[-1] + 1).all())


def test_a_second_event_loop_is_refused_while_the_first_serves(hf: Any) -> None:
    # A second loop started a second step loop over the same queues; when either loop ended
    # its cancellation failed the other loop's requests.
    import threading

    decoder = _decoder(hf)
    prompt = _prompts(1, seed=31)[0]
    expected = _alone(decoder, prompt, 40)
    server = _server(decoder)
    request = GenerationRequest(prompt_ids=prompt, max_new_tokens=40, greedy=True)
    release, first = threading.Event(), []

    def serve_first() -> None:
        async def main() -> GenerationResult:
            task = asyncio.create_task(server.generate(request))
            while not release.is_set():  # keep the first loop's step loop alive
                await asyncio.sleep(0.001)
            return await task

        first.append(asyncio.run(main()))

    thread = threading.Thread(target=serve_first)
    thread.start()
    try:
        while server.stats.steps < 1:
            threading.Event().wait(0.001)
        with pytest.raises(HfsdkError, match="serves one event loop at a time"):
            _serve(server, [GenerationRequest(prompt_ids=[3, 4], max_new_tokens=2)])
    finally:
        release.set()
        thread.join()
    assert list(first[0].token_ids) == expected
    [later] = _serve(server, [request])  # the first loop is done: another may use the server
    assert list(later.token_ids) == expected
    server.close()
