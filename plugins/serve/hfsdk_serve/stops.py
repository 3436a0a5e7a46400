"""Stop strings (``SamplingParams(stop=["..."])``): each sample cut after the fact.

The rollout contract stops on token ids only, so a call with stop strings is
generated to its own end (EOS or ``max_tokens``) and each sample is then cut at
the first generated token whose decoded response so far contains one of the
strings. That token is kept (its text completes the stop string; a renderer's
``parse_response`` splits the text on it, as the Tinker service's own samples
need) and so is its log-prob; the rest is dropped and the stop reason becomes
``"stop"``. A sample where no string appears is returned unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from hfsdk import HfsdkError
from hfsdk_serve.wire import SequenceOut

Stop = str | Sequence[str] | Sequence[int] | None


def split_stop(stop: Stop) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """``SamplingParams.stop`` as (stop token ids, stop strings); one clear error if malformed."""
    if stop is None:
        return (), ()
    if isinstance(stop, str):
        stop = [stop]
    if len(stop) == 0:
        raise HfsdkError("stop=[] (no EOS) is not served; leave stop unset or pass token ids")
    if all(isinstance(s, int) and not isinstance(s, bool) for s in stop):
        return tuple(int(s) for s in stop), ()
    if all(isinstance(s, str) and s for s in stop):
        return (), tuple(str(s) for s in stop)
    raise HfsdkError(
        f"stop={list(stop)!r} is malformed; expected non-empty strings or token ids (not mixed)"
    )


def cut_at_stop(
    seq: SequenceOut, stops: Sequence[str], decode: Callable[[list[int]], str]
) -> SequenceOut:
    """``seq`` up to and including the first token whose response text contains a stop string."""
    # Prefix texts are prefixes of the whole text, so a sample whose whole text holds no
    # stop string needs no per-token scan.
    if not stops or not any(s in decode(list(seq.tokens)) for s in stops):
        return seq
    for end in range(1, len(seq.tokens) + 1):
        text = decode(seq.tokens[:end])
        if any(s in text for s in stops):
            return SequenceOut(
                tokens=list(seq.tokens[:end]), logprobs=list(seq.logprobs[:end]), stopped=True
            )
    return seq
