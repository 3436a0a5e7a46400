"""The request types of request-level generation (one turn of one trajectory).

Part of the rollout contract (:mod:`hfsdk.core.rollout_contract` re-exports them);
kept in a module of their own that imports nothing of hfsdk but its errors, so
agent loops can use them without importing the contract's registry lookups.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Coroutine, Sequence
from typing import Any

import attrs

from hfsdk.core.errors import HfsdkError

FINISH_REASONS = ("stop", "length")


def _token_ids(value: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(t) for t in value)


@attrs.frozen(kw_only=True)
class GenerationRequest:
    """One turn of one trajectory: continue ``prompt_ids`` by at most ``max_new_tokens``.

    ``prompt_ids`` is the whole context so far as token ids (token-in: nothing
    is re-tokenized). Sampling: ``greedy`` (or ``temperature`` 0) picks the most
    likely token; otherwise tokens are drawn at ``temperature`` from the nucleus
    ``top_p``. ``seed`` makes one request's sampling reproducible whatever else
    is in flight (``None``: drawn from torch's global generator). ``top_k`` > 0
    keeps only the ``top_k`` most likely tokens before the nucleus cut (0: no
    cut); a backend that cannot honour it per request refuses the request with
    one line rather than ignore it. Generation
    stops at the model's EOS ids, at any of ``stop_token_ids`` (e.g. the id that
    ends a tool call), or after ``max_new_tokens``. ``prompt_logprobs`` asks for
    the log-probability of every prompt token after the first as well (see
    :class:`GenerationResult`); a backend that cannot give them refuses the request.
    """

    prompt_ids: tuple[int, ...] = attrs.field(converter=_token_ids)
    max_new_tokens: int = attrs.field(validator=attrs.validators.ge(1))
    temperature: float = attrs.field(default=1.0, validator=attrs.validators.ge(0.0))
    top_p: float = attrs.field(
        default=1.0, validator=[attrs.validators.gt(0.0), attrs.validators.le(1.0)]
    )
    top_k: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    greedy: bool = False
    seed: int | None = None
    stop_token_ids: tuple[int, ...] = attrs.field(default=(), converter=_token_ids)
    prompt_logprobs: bool = False

    @prompt_ids.validator
    def _check_prompt(self, attribute: attrs.Attribute, value: tuple[int, ...]) -> None:
        if not value:
            raise HfsdkError("GenerationRequest.prompt_ids is empty; a request needs a context")

    @property
    def is_greedy(self) -> bool:
        """Whether the request picks the most likely token (``greedy`` or temperature 0)."""
        return self.greedy or self.temperature == 0.0

    @property
    def logprob_temperature(self) -> float:
        """The temperature its log-probs are taken at (1 for greedy requests)."""
        return 1.0 if self.is_greedy else self.temperature


@attrs.frozen(kw_only=True)
class GenerationResult:
    """What the model produced for one :class:`GenerationRequest` (token-out).

    ``token_ids`` include the stop token when one ended it (``finish_reason``
    ``"stop"``); ``"length"`` means ``max_new_tokens`` (or the backend's limit)
    ran out. ``logprobs[i]`` is the log-probability of ``token_ids[i]`` under the
    model's distribution at the request's temperature alone (no top-p
    renormalisation; temperature 1 for greedy requests): what a teacher-forced
    forward over the same tokens gives. A backend that cannot compute them
    reports NaN. ``prompt_logprobs`` (when the request asked for them):
    ``log p(prompt[i] | prompt[:i])`` for ``i >= 1`` at temperature 1, one per
    prompt token after the first (NaN where the backend cannot compute them);
    ``None`` otherwise.
    """

    token_ids: tuple[int, ...] = attrs.field(converter=_token_ids)
    logprobs: tuple[float, ...] = attrs.field(converter=lambda v: tuple(float(x) for x in v))
    finish_reason: str = attrs.field(validator=attrs.validators.in_(FINISH_REASONS))
    prompt_logprobs: tuple[float, ...] | None = attrs.field(
        default=None, converter=lambda v: None if v is None else tuple(float(x) for x in v)
    )

    def __attrs_post_init__(self) -> None:
        if len(self.token_ids) != len(self.logprobs):
            raise HfsdkError(
                f"GenerationResult has {len(self.token_ids)} tokens but {len(self.logprobs)} "
                "log-probs; a backend must report one log-prob per produced token"
            )


def run_coroutine(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Run ``coroutine`` (requests to ``generate_request``, say) to its end from synchronous
    code: on a fresh event loop, in a thread of its own when this thread already runs a loop
    (as an async Ray actor's does)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
