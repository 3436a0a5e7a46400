"""A request's sampling settings (``n``, ``temperature``, ``top_p``, ``max_tokens``, ``stop``,
``logprobs``) checked, with the run's own settings as defaults."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from hfsdk_agents.gateway.errors import bad_request
from hfsdk_agents.loops import AgentContext

MAX_N = 16
MAX_STOPS = 4

UNSERVED: dict[str, Any] = {
    "logit_bias": lambda v: not v,
    "presence_penalty": lambda v: not v,
    "frequency_penalty": lambda v: not v,
    "response_format": lambda v: v is None or (isinstance(v, Mapping) and v.get("type") == "text"),
    "tool_choice": lambda v: v is None or v in ("auto", "none"),
    "echo": lambda v: not v,
    "best_of": lambda v: v is None or v == 1,
    "suffix": lambda v: not v,
    # Legacy function calling: a forced call or functions to call are not applied.
    "functions": lambda v: not v,
    "function_call": lambda v: v is None or v in ("auto", "none"),
    # The parser returns every call the model wrote: one call at most is not enforced.
    "parallel_tool_calls": lambda v: v is None or v is True,
    "reasoning_effort": lambda v: v is None,
    # vLLM's sampling extras (the SDK's extra_body): the engine takes the run's settings.
    "top_k": lambda v: v is None or (not isinstance(v, bool) and v in (0, -1)),
    "min_p": lambda v: v is None or (not isinstance(v, bool) and v == 0),
    "repetition_penalty": lambda v: v is None or (not isinstance(v, bool) and v == 1),
    "min_tokens": lambda v: v is None or (not isinstance(v, bool) and v == 0),
    "ignore_eos": lambda v: v is None or v is False,
    "chat_template_kwargs": lambda v: not v,
}
"""Parameters the engine does not apply, each with the test of its no-op values: any
other value would sample something else than the request asks for."""


def _number(body: Mapping[str, Any], key: str, default: float, low: float, high: float) -> float:
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise bad_request(f"{key}={value!r}; expected a number in [{low}, {high}]", param=key)
    return float(value)


def _check_served(ctx: AgentContext, **asked: float) -> None:
    """Refuse a ``temperature`` / ``top_p`` other than the run's when the server samples with
    the rollout's own (``serving: turn``: ``generate_sequences`` takes no per-request
    settings), rather than answer with tokens sampled otherwise. A greedy call (validation)
    ignores them whatever the server."""
    if ctx.greedy or ctx.applies_sampling:
        return
    run = {"temperature": ctx.temperature, "top_p": ctx.top_p}
    for key, value in asked.items():
        if value != run[key]:
            raise bad_request(
                f"{key}={value!r} is not served: this rollout samples every turn at the run's "
                f"rollout.{key}={run[key]!r} (rollout.multi_turn.serving=turn or a rollout "
                f"without request serving); leave {key} unset or send {run[key]!r}",
                param=key,
            )


def _completion_logprobs(body: Mapping[str, Any]) -> bool:
    """A completions ``logprobs``: 0 or 1 asks for the sampled tokens' log-probs; more asks
    for top tokens, which the engine does not return."""
    value = body.get("logprobs")
    if value is None or value is False:
        return False
    if value is True or (isinstance(value, int) and 0 <= value <= 1):
        return True
    raise bad_request(
        f"logprobs={value!r} is not served: the engine returns the sampled token's log-prob "
        "only; send logprobs=0 or 1, or leave it unset",
        param="logprobs",
    )


@attrs.frozen(kw_only=True)
class Sampling:
    """What one request asks for; ``stop`` strings end a choice (the text before them is
    the content; the tokens up to the one that completes them are kept)."""

    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int | None = None
    stop: tuple[str, ...] = ()
    logprobs: bool = False

    @classmethod
    def parse(cls, body: Mapping[str, Any], ctx: AgentContext, *, legacy: bool = False) -> Sampling:
        """From a request body; a bad value is a 400 naming the field. ``legacy``: a
        ``/v1/completions`` body, whose ``logprobs`` is a count of top tokens."""
        n = body.get("n", 1)
        if n is None:
            n = 1
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_N:
            raise bad_request(f"n={n!r}; expected an integer from 1 to {MAX_N}", param="n")
        for key, unchanged in UNSERVED.items():
            if not unchanged(body.get(key)):
                raise bad_request(
                    f"{key}={body[key]!r} is not served: the policy samples without it, so the "
                    f"answer would not be what the request asks for; leave {key} unset",
                    param=key,
                )
        # An explicit null max_completion_tokens defers to max_tokens; an error names the
        # key the value came from.
        deferred = body.get("max_completion_tokens") is None
        limit_key = "max_tokens" if deferred else "max_completion_tokens"
        max_tokens = body.get(limit_key)
        if max_tokens is not None and (
            isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
        ):
            raise bad_request(
                f"{limit_key}={max_tokens!r}; expected a positive integer", param=limit_key
            )
        stop = body.get("stop")
        listed = isinstance(stop, list) and len(stop) <= MAX_STOPS
        stops = (stop,) if isinstance(stop, str) else tuple(stop) if listed else ()
        if (stop is not None and not (listed or stops)) or not all(
            isinstance(s, str) and s for s in stops
        ):
            raise bad_request(
                f"stop={stop!r}; expected a string or up to {MAX_STOPS} non-empty strings",
                param="stop",
            )
        if body.get("top_logprobs"):
            raise bad_request(
                f"top_logprobs={body['top_logprobs']!r} is not served: the engine returns the "
                "sampled token's log-prob only; leave top_logprobs unset or 0",
                param="top_logprobs",
            )
        top_p = _number(body, "top_p", ctx.top_p, 0.0, 1.0)
        if top_p == 0.0:
            raise bad_request("top_p=0; expected a number in (0, 1]", param="top_p")
        temperature = _number(body, "temperature", ctx.temperature, 0.0, 2.0)
        _check_served(ctx, temperature=temperature, top_p=top_p)
        return cls(
            n=n,
            temperature=temperature,
            top_p=top_p,
            max_tokens=max_tokens,
            stop=stops,
            logprobs=_completion_logprobs(body) if legacy else bool(body.get("logprobs")),
        )

    def stop_ids(self, tokenizer: Any) -> list[int]:
        """Stop strings that are one token: the engine stops at them itself."""
        out = []
        for text in self.stop:
            ids = tokenizer.encode(text, add_special_tokens=False)
            if len(ids) == 1 and tokenizer.decode(ids, skip_special_tokens=False) == text:
                out.append(int(ids[0]))
        return out

    def cut_at_stop_strings(self, tokenizer: Any, ids: list[int]) -> int | None:
        """How many tokens to keep: up to the one that completes the first stop string."""
        if not self.stop:
            return None
        for end in range(1, len(ids) + 1):
            text = tokenizer.decode(ids[:end], skip_special_tokens=False)
            if any(s in text for s in self.stop):
                return end
        return None

    def before_stop_string(self, text: str) -> str:
        """``text`` up to the first stop string (the API leaves the stop out)."""
        cuts = [text.find(s) for s in self.stop if s in text]
        return text[: min(cuts)] if cuts else text
