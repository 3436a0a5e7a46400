"""Stop strings: each sample cut after the first token whose text completes one."""

from __future__ import annotations

from typing import Any

import pytest
from tinker import types

from hfsdk import HfsdkError
from hfsdk_serve.stops import cut_at_stop, split_stop
from hfsdk_serve.wire import SequenceOut

PIECES = {1: "4", 2: "2", 3: "\n", 4: "\nUs", 5: "er:", 6: " x", 7: "!"}


def decode(tokens: list[int]) -> str:
    return "".join(PIECES[t] for t in tokens)


def seq(tokens: list[int]) -> SequenceOut:
    return SequenceOut(tokens=tokens, logprobs=[-0.1 * t for t in tokens], stopped=False)


def test_a_stop_string_spanning_two_tokens_keeps_the_token_that_completes_it() -> None:
    out = cut_at_stop(seq([1, 2, 3, 4, 5, 6, 7]), ["\n\nUser:"], decode)
    assert out.tokens == [1, 2, 3, 4, 5] and out.stopped
    assert out.logprobs == pytest.approx([-0.1, -0.2, -0.3, -0.4, -0.5])


def test_no_stop_string_leaves_the_sample_unchanged() -> None:
    sample = seq([1, 2, 6, 7])
    assert cut_at_stop(sample, ["\n\nUser:", "?"], decode) is sample
    assert cut_at_stop(sample, [], decode) is sample


def test_several_stop_strings_cut_at_the_earliest() -> None:
    tokens = [1, 6, 2, 7, 3, 4, 5]
    assert cut_at_stop(seq(tokens), ["!", " x"], decode).tokens == [1, 6]
    assert cut_at_stop(seq(tokens), ["\n\nUser:", "2!"], decode).tokens == [1, 6, 2, 7]


def test_split_stop_accepts_ids_or_strings_and_refuses_the_rest() -> None:
    assert split_stop(None) == ((), ())
    assert split_stop([5, 7]) == ((5, 7), ())
    assert split_stop("\n") == ((), ("\n",))
    assert split_stop(["a", "b"]) == ((), ("a", "b"))
    for bad in ([], [""], ["a", 3], [True]):
        with pytest.raises(HfsdkError, match="stop"):
            split_stop(bad)  # type: ignore[arg-type]


def test_served_samples_stop_at_a_string(service_client: Any, served: Any) -> None:
    """Through the SDK: a greedy sample cut at a string spanning its first two tokens."""
    tokenizer = served.tokenizer
    sampler = service_client.create_sampling_client(base_model=str(served.model_dir)).result()
    prompt = types.ModelInput.from_ints(tokenizer.encode("3 + 5 ="))
    greedy = types.SamplingParams(max_tokens=8, temperature=0.0)
    full = sampler.sample(prompt, 1, greedy).result().sequences[0]
    assert len(full.tokens) >= 3, full.tokens
    # The stop string: the last character of token 0's text and all that token 1 adds
    # (a span of two tokens), so the sample ends with token 1, log-probs cut alike.
    head = tokenizer.decode(full.tokens[:1])
    text = tokenizer.decode(full.tokens[:2])
    stop = head[-1] + text[len(head) :]
    assert stop not in head and len(stop) >= 2, (head, text)
    params = types.SamplingParams(max_tokens=8, temperature=0.0, stop=[stop, "\x00never"])
    cut = sampler.sample(prompt, 1, params).result().sequences[0]
    assert cut.stop_reason == "stop"
    assert cut.tokens == full.tokens[:2]
    assert cut.logprobs == pytest.approx(full.logprobs[:2], abs=1e-5)
