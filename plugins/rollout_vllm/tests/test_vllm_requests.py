"""The vLLM rollout serves single requests with the engine's own continuous batching.

Greedy requests in flight together (staggered arrival) get what the ``hf``
rollout's greedy generation gives on each prompt; a seeded sampled request
draws the same tokens alone and in a crowd; stop tokens end a request; the
log-probs of temperature-1 requests equal a teacher-forced forward of the
actor's model; requests the engine's log-prob mode cannot serve exactly get NaN.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest
import torch

from hfsdk import Batch, GenerationRequest, GenerationResult

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _serve(rollout: Any, requests: list[GenerationRequest],
           stagger: float = 0.0) -> list[GenerationResult]:  # fmt: skip
    async def one(i: int, request: GenerationRequest) -> GenerationResult:
        await asyncio.sleep(stagger * i)
        return await rollout.generate_request(request)

    async def main() -> list[GenerationResult]:
        return await asyncio.gather(*(one(i, r) for i, r in enumerate(requests)))

    with rollout.serving():
        return asyncio.run(main())


def _ids(rollout: Any, texts: list[str]) -> list[list[int]]:
    return [rollout.tokenizer(t).input_ids for t in texts]


def test_greedy_requests_equal_hf_greedy(vllm_rollout, hf_rollout, prompt_texts) -> None:
    prompts = _ids(vllm_rollout, prompt_texts)
    results = _serve(vllm_rollout, [GenerationRequest(prompt_ids=p, max_new_tokens=8, greedy=True)
                                    for p in prompts], stagger=0.01)  # fmt: skip
    for ids, result in zip(prompts, results, strict=True):
        tensor = torch.tensor([ids])
        batch = Batch.from_dict(tensors={"input_ids": tensor,
                                         "attention_mask": torch.ones_like(tensor)})  # fmt: skip
        out = hf_rollout.generate_sequences(batch, greedy=True)
        want = out["responses"][0][out["response_mask"][0].bool()].tolist()
        assert list(result.token_ids) == want
        eos = vllm_rollout.tokenizer.eos_token_id
        assert result.finish_reason == ("stop" if want[-1] == eos else "length")
    assert any(r.finish_reason == "stop" for r in results)  # the warm-started model answers
    stats = vllm_rollout.request_server.stats
    assert stats.peak_batch > 1 and stats.steps < stats.tokens  # batched by vLLM


def test_sampled_requests_seeds_log_probs_and_stops(vllm_rollout, actor, prompt_texts) -> None:
    prompts = _ids(vllm_rollout, prompt_texts)
    target = GenerationRequest(prompt_ids=prompts[0], max_new_tokens=8, seed=7)
    alone = _serve(vllm_rollout, [target])[0]
    crowd = [GenerationRequest(prompt_ids=p, max_new_tokens=8, seed=i)
             for i, p in enumerate(prompts)]  # fmt: skip
    together = _serve(vllm_rollout, [*crowd, target, *crowd], stagger=0.005)
    assert together[len(crowd)].token_ids == alone.token_ids
    # Log-probs (temperature 1) of the actor's model on the produced tokens.
    module = actor.module
    for request, result in zip([*crowd, target], [*together[: len(crowd)], alone], strict=True):
        full = torch.tensor([[*request.prompt_ids, *result.token_ids]])
        with torch.no_grad():
            logits = module(input_ids=full).logits[0, len(request.prompt_ids) - 1 : -1]
        want = logits.float().log_softmax(-1).gather(-1, torch.tensor(result.token_ids)[:, None])
        torch.testing.assert_close(torch.tensor(result.logprobs), want[:, 0], atol=1e-4, rtol=0)
    # A stop token ends a request (and is kept).
    tokens = list(alone.token_ids)
    stop = tokens[1]
    cut = _serve(vllm_rollout, [GenerationRequest(prompt_ids=prompts[0], max_new_tokens=8,
                                                  seed=7, stop_token_ids=[stop])])[0]  # fmt: skip
    assert list(cut.token_ids) == tokens[: tokens.index(stop) + 1]
    assert cut.finish_reason == "stop"
    # At another temperature the engine's raw log-probs are not the contract's: NaN.
    warm = _serve(vllm_rollout, [GenerationRequest(prompt_ids=prompts[0], max_new_tokens=4,
                                                   temperature=0.7, seed=1)])[0]  # fmt: skip
    assert all(math.isnan(lp) for lp in warm.logprobs)


def test_top_k_and_prompt_logprobs_per_request(vllm_rollout, actor, prompt_texts) -> None:
    """``top_k=1`` at temperature 1 draws the argmax whatever the seed; asked-for prompt
    log-probs equal the actor's teacher-forced forward (others get none)."""
    prompts = _ids(vllm_rollout, prompt_texts[:3])
    greedy = _serve(vllm_rollout, [GenerationRequest(prompt_ids=p, max_new_tokens=6,
                                                     greedy=True) for p in prompts])  # fmt: skip
    cut = _serve(vllm_rollout, [GenerationRequest(prompt_ids=p, max_new_tokens=6, seed=s,
                                                  top_k=1, prompt_logprobs=s != 1)
                                for s, p in enumerate(prompts)])  # fmt: skip
    assert [r.token_ids for r in cut] == [r.token_ids for r in greedy]
    assert cut[1].prompt_logprobs is None and greedy[0].prompt_logprobs is None
    for i in (0, 2):
        ids = torch.tensor([prompts[i]])
        with torch.no_grad():
            logits = actor.module(input_ids=ids).logits[0, :-1]
        want = logits.float().log_softmax(-1).gather(-1, ids[0, 1:, None])[:, 0]
        torch.testing.assert_close(torch.tensor(cut[i].prompt_logprobs), want, atol=1e-4, rtol=0)


def test_processed_logprobs_match_only_without_top_p_or_top_k() -> None:
    """At a temperature other than 0 or 1 the engine's log-probs are ``processed_logprobs``:
    taken after top-k/top-p as well, so a top-k (or top-p) request's are renormalised over the
    kept tokens and must come back NaN, not as the contract's (no engine needed)."""
    from hfsdk_rollout_vllm.request_server import logprobs_match
    from hfsdk_rollout_vllm.vllm_config import VLLMRolloutConfig

    config = VLLMRolloutConfig(temperature=0.7)
    assert config.logprobs_mode() == "processed_logprobs"
    at = dict(prompt_ids=[1, 2], max_new_tokens=4, temperature=0.7)
    assert logprobs_match(config, GenerationRequest(**at))
    assert not logprobs_match(config, GenerationRequest(**at, top_k=5))
    assert not logprobs_match(config, GenerationRequest(**at, top_p=0.9))
    assert not logprobs_match(config, GenerationRequest(**{**at, "temperature": 1.0}))
    # raw_logprobs (temperature 1): top-k/top-p never enter the values.
    raw = VLLMRolloutConfig(temperature=1.0)
    assert logprobs_match(raw, GenerationRequest(prompt_ids=[1], max_new_tokens=1, top_k=5))


def test_every_request_checks_the_engines_weights_version() -> None:
    """A skipped reload is refused per request, not only when the request server starts (the
    server may already run when the actor moves on); no engine needed."""
    from types import SimpleNamespace

    from hfsdk import HfsdkError
    from hfsdk_backend_common import WeightSyncMismatch
    from hfsdk_rollout_vllm.hybrid_vllm import HybridVLLMRollout
    from hfsdk_rollout_vllm.request_server import ServesRequests
    from hfsdk_rollout_vllm.vllm_config import VLLMRolloutConfig

    class Served(ServesRequests):
        config, eos_ids, loaded_version = VLLMRolloutConfig(), [0], 0
        actor = SimpleNamespace(weights_version=0)

        def _vllm_engine(self) -> Any:
            return None

    served, sent = Served(), []
    request = GenerationRequest(prompt_ids=[1, 2], max_new_tokens=1)

    async def generate(request: GenerationRequest) -> GenerationResult:
        sent.append(request)
        return GenerationResult(token_ids=[3], logprobs=[0.0], finish_reason="length")

    served._request_server = SimpleNamespace(generate=generate)  # type: ignore[assignment]

    def send() -> GenerationResult:
        return asyncio.run(served.generate_request(request))

    assert send().token_ids == (3,)  # the server is up, at the actor's version
    served.actor.weights_version = 1  # the actor updated; the reload was skipped
    with pytest.raises(WeightSyncMismatch, match="a weight reload was skipped"):
        send()
    assert len(sent) == 1
    # The shard-fed engine reloads inside serving(); stale weights outside it are refused.
    hybrid = object.__new__(HybridVLLMRollout)
    hybrid.weights_stale, hybrid.loaded_version = True, 0
    hybrid.actor = SimpleNamespace(weights_version=1)
    with pytest.raises(HfsdkError, match=r"enter rollout.serving\(\)"):
        hybrid._require_current()
    hybrid.weights_stale, hybrid.loaded_version = False, 1
    hybrid._require_current()


@pytest.mark.parametrize("temperature", [2.5, 50.0])
def test_a_request_vllm_would_refuse_fails_alone_before_the_engine(temperature: float) -> None:
    """vLLM refuses such a request inside ``enqueue``, in the step shared by every request in
    flight (all failed, as an internal error); it is refused on its own, before it is queued
    (no engine needed: the engine is never reached)."""
    from types import SimpleNamespace

    from hfsdk import HfsdkError
    from hfsdk_rollout_vllm.request_server import VLLMRequestServer
    from hfsdk_rollout_vllm.vllm_config import VLLMRolloutConfig

    model_config = SimpleNamespace(max_model_len=64)
    engine = SimpleNamespace(llm=SimpleNamespace(llm_engine=SimpleNamespace(
        model_config=model_config)))  # fmt: skip
    server = VLLMRequestServer(engine, VLLMRolloutConfig(), [0])  # type: ignore[arg-type]
    request = GenerationRequest(prompt_ids=[1, 2], max_new_tokens=2, temperature=temperature)
    try:
        with pytest.raises(HfsdkError) as info:
            asyncio.run(server.generate(request))
    finally:
        server.close()
    line = str(info.value)
    assert line.startswith("vLLM refuses this request's sampling settings (")
    assert f"temperature must be in [0, 2], got {temperature}" in line
    assert "\n" not in line and server._pending == [] and server.stats.requests == 0


def _engine_unfinished(rollout: Any) -> int:
    return rollout.engine.llm.llm_engine.get_num_unfinished_requests()


async def _until_running(rollout: Any) -> None:
    """Wait until the request server has handed a request to the engine."""
    while rollout.request_server is None or not rollout.request_server._running:
        await asyncio.sleep(0)


def test_a_cancelled_request_leaves_no_output_for_the_next_batch(
    vllm_rollout, make_prompts, prompt_texts
) -> None:
    """A client that gives up on a request (a per-turn timeout) and ends its event loop leaves
    nothing in the engine: the next batch's rows are each their own prompt's response (vLLM's
    ``generate`` returns every finished request, a stale one first)."""
    batch = make_prompts(prompt_texts)
    reference = vllm_rollout.generate_sequences(batch, greedy=True)["responses"]
    request = GenerationRequest(prompt_ids=list(range(5, 60)), max_new_tokens=8, greedy=True)

    async def cancelled_client() -> None:
        task = asyncio.ensure_future(vllm_rollout.generate_request(request))
        await _until_running(vllm_rollout)
        task.cancel()  # the event loop then ends with the request in flight

    with vllm_rollout.serving():
        asyncio.run(cancelled_client())
    assert _engine_unfinished(vllm_rollout) == 0
    rows = vllm_rollout.generate_sequences(batch, greedy=True)["responses"]
    assert [torch.equal(a, b) for a, b in zip(rows, reference, strict=True)] == [True] * 6


def test_a_batch_aborts_requests_left_in_the_engine(
    vllm_rollout, make_prompts, prompt_texts, caplog
) -> None:
    """Requests some other caller left unfinished in the engine are aborted (with a warning)
    before a batch, so they cannot take its rows."""
    batch = make_prompts(prompt_texts)
    reference = vllm_rollout.generate_sequences(batch, greedy=True)["responses"]
    vllm_rollout.engine.llm.enqueue(
        [{"prompt_token_ids": list(range(5, 60))}], vllm_rollout.sampling_params(True),
        use_tqdm=False,
    )  # fmt: skip
    with caplog.at_level("WARNING", logger="hfsdk_rollout_vllm.requests"):
        rows = vllm_rollout.generate_sequences(batch, greedy=True)["responses"]
    assert torch.equal(rows, reference)
    assert "aborted 1 unfinished request" in caplog.text
    assert _engine_unfinished(vllm_rollout) == 0


def test_a_too_long_request_fails_alone(vllm_rollout, prompt_texts) -> None:
    """A prompt the engine cannot hold is refused on its own, naming the keys to raise; the
    request in flight beside it completes and nothing stays in the engine."""
    from hfsdk import HfsdkError

    good = GenerationRequest(prompt_ids=_ids(vllm_rollout, prompt_texts[:1])[0],
                             max_new_tokens=8, greedy=True)  # fmt: skip
    alone = _serve(vllm_rollout, [good])[0]
    too_long = GenerationRequest(prompt_ids=list(range(5, 105)), max_new_tokens=4, greedy=True)

    async def main() -> GenerationResult:
        task = asyncio.ensure_future(vllm_rollout.generate_request(good))
        await _until_running(vllm_rollout)
        with pytest.raises(HfsdkError, match=r"rollout\.max_prompt_length"):
            await vllm_rollout.generate_request(too_long)
        return await task

    with vllm_rollout.serving():
        result = asyncio.run(main())
    assert result.token_ids == alone.token_ids
    assert _engine_unfinished(vllm_rollout) == 0
