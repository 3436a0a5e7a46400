"""The ``remote`` reward: score a batch with an HTTP endpoint (a reward model served elsewhere).

``reward.functions: [{url: http://host:port/score}]`` (or ``{name: remote,
kwargs: {url: ...}}``). The batch is sent in chunks of ``batch_size`` samples
as ``POST`` requests with a JSON body::

    {"prompts": [...], "responses": [...], "columns": {"answer": [...], ...}}

and the endpoint answers ``{"scores": [...]}`` (or a bare list): one number, or
one object with a ``score`` key (other numeric keys become metrics), per
sample. Chunks go out concurrently (``concurrency``). A request that times
out, cannot connect or gets a 5xx answer is retried ``retries`` times with
exponential backoff; a 4xx answer or a malformed body is not retried. Every
failure is one error line naming the endpoint, what happened and what to do.
"""

from __future__ import annotations

import json
import math
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlparse

import attrs

from hfsdk.core.config.help import help_field
from hfsdk.core.errors import HfsdkError


def _http_url(_instance: object, attribute: attrs.Attribute, value: str) -> None:
    parsed = urlparse(value)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ValueError(
            f"{attribute.name}={value!r} is not an http(s) URL; expected e.g. "
            "http://127.0.0.1:8000/score"
        )


@attrs.frozen(kw_only=True)
class RemoteRewardConfig:
    """Where the endpoint is, and how long and how often to try it."""

    url: str = help_field("The endpoint's URL (http or https).", validator=_http_url)
    timeout_s: float = help_field(
        "Seconds one request may take before it is retried.",
        default=30.0,
        validator=attrs.validators.gt(0.0),
    )
    retries: int = help_field(
        "Retries of a request that timed out, could not connect or got a 5xx answer.",
        default=3,
        validator=attrs.validators.ge(0),
    )
    backoff_s: float = help_field(
        "Wait before the first retry; doubled for each further one.",
        default=0.5,
        validator=attrs.validators.ge(0.0),
    )
    batch_size: int = help_field(
        "Samples per request.",
        default=64,
        validator=attrs.validators.ge(1),
    )
    concurrency: int = help_field(
        "Requests in flight at once.",
        default=4,
        validator=attrs.validators.ge(1),
    )


class _Retryable(Exception):
    """A failure worth another try (timeout, connection, 5xx)."""


def _jsonable(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def _post(config: RemoteRewardConfig, body: bytes) -> bytes:
    request = urllib.request.Request(
        config.url, data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=config.timeout_s) as answer:
            return answer.read()
    except urllib.error.HTTPError as exc:
        if exc.code >= 500:
            raise _Retryable(f"HTTP {exc.code} {exc.reason}") from None
        raise HfsdkError(
            f"reward endpoint {config.url} answered HTTP {exc.code} {exc.reason}; check the URL "
            "and what the endpoint expects (docs/rewards.md#remote-reward-endpoints)"
        ) from None
    except (TimeoutError, urllib.error.URLError, ConnectionError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise _Retryable(f"{type(reason).__name__}: {reason}") from None


def _scores(config: RemoteRewardConfig, raw: bytes, expected: int) -> list[Any]:
    try:
        parsed = json.loads(raw)
    except ValueError:
        shown = raw[:80].decode("utf-8", errors="replace")
        raise HfsdkError(
            f"reward endpoint {config.url} answered something that is not JSON ({shown!r}); "
            'it must answer {"scores": [...]}'
        ) from None
    scores = parsed.get("scores") if isinstance(parsed, dict) else parsed
    if not isinstance(scores, list) or len(scores) != expected:
        got = f"{len(scores)} scores" if isinstance(scores, list) else type(scores).__name__
        raise HfsdkError(
            f"reward endpoint {config.url} answered {got} for {expected} samples; it must "
            'answer {"scores": [...]} with one score per sample'
        )
    for score in scores:
        value = score.get("score") if isinstance(score, dict) else score
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
        ):
            raise HfsdkError(
                f"reward endpoint {config.url} answered the score {score!r}; expected a finite "
                "number or an object with a numeric 'score'"
            )
    return scores


def _request(config: RemoteRewardConfig, payload: dict[str, Any], size: int) -> list[Any]:
    body = json.dumps(payload).encode()
    wait = config.backoff_s
    problem = ""
    for attempt in range(config.retries + 1):
        if attempt:
            time.sleep(wait)
            wait *= 2
        try:
            return _scores(config, _post(config, body), size)
        except _Retryable as exc:
            problem = str(exc)
    raise HfsdkError(
        f"reward endpoint {config.url} failed {config.retries + 1} times (last: {problem}); "
        "check that it is running and reachable, or raise timeout_s / retries"
    )


def remote_reward(
    prompts: Sequence[str],
    responses: Sequence[str],
    *,
    config: RemoteRewardConfig,
    **columns: Sequence[Any],
) -> list[Any]:
    """Scores of the batch from the endpoint ``config.url`` (see the module docstring)."""
    step = config.batch_size
    chunks = []
    for start in range(0, len(responses), step):
        end = min(start + step, len(responses))
        payload = {
            "prompts": _jsonable(list(prompts[start:end])),
            "responses": _jsonable(list(responses[start:end])),
            "columns": {k: _jsonable(list(v[start:end])) for k, v in columns.items()},
        }
        chunks.append((payload, end - start))
    if not chunks:
        return []
    with ThreadPoolExecutor(max_workers=min(config.concurrency, len(chunks))) as pool:
        parts = list(pool.map(lambda chunk: _request(config, *chunk), chunks))
    return [score for part in parts for score in part]
