"""The ``remote`` reward: score a batch with an HTTP endpoint (a reward model served elsewhere).

``reward.functions: [{url: http://host:port/score}]`` (or ``{name: remote,
kwargs: {url: ...}}``). The batch is sent in chunks of ``batch_size`` samples
as ``POST`` requests with a JSON body::

    {"prompts": [...], "responses": [...], "columns": {"answer": [...], ...}}

and the endpoint answers ``{"scores": [...]}`` (or a bare list): one number, or
one object with a ``score`` key (other numeric keys become metrics), per
sample. Chunks go out concurrently (``concurrency``) over pooled, kept-alive
connections (one ``requests`` session per endpoint). urllib3's ``Retry``
retries a request that times out, cannot connect, or gets 429 or a 5xx answer
``retries`` times with exponential backoff, waiting as long as a 429/503
answer's ``Retry-After`` asks; another 4xx answer or a malformed body is not
retried. Every failure is one error line naming the endpoint, what happened
and what to do.
"""

from __future__ import annotations

import functools
import json
import math
import threading
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlparse

import attrs

from hfsdk import HfsdkError, help_field


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
        "Seconds one try of a request may take in all (connecting, waiting, reading) "
        "before it is retried.",
        default=30.0,
        validator=attrs.validators.gt(0.0),
    )
    retries: int = help_field(
        "Retries of a request that timed out, could not connect or got a 429 or 5xx answer.",
        default=3,
        validator=attrs.validators.ge(0),
    )
    backoff_s: float = help_field(
        "Backoff between retries (urllib3's backoff_factor: doubled for each further one); a "
        "429/503 answer's Retry-After is waited instead when it says more.",
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


def _jsonable(value: Any) -> Any:
    """``value`` as plain JSON data: arrays as lists, NaN and infinities as ``null``.

    JSON has no NaN: a bare ``NaN`` in the body is refused by strict parsers (Go's,
    JavaScript's, serde), so a missing value in a column would fail every request.
    """
    if isinstance(value, float):  # numpy's float64 too
        return value if math.isfinite(value) else None
    if hasattr(value, "tolist"):  # a numpy array or scalar; its items may be NaN as well
        return _jsonable(value.tolist())
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    return str(value)


ERROR_BODY_BYTES = 200
"""How much of a refusing answer's body (a 4xx's reason) the error line quotes."""


RETRY_STATUSES = (429, 500, 502, 503, 504)
"""Answers worth another try: too many requests, and the server's own failures."""


MAX_ANSWER_BYTES = 64 << 20
"""The most an endpoint's answer may hold (one that never ends would fill the memory)."""
MAX_RETRY_AFTER_S = 30.0
"""The longest ``Retry-After`` honoured: a day-long one would hang the run's reward stage."""


@functools.lru_cache(maxsize=16)
def _session(url: str, retries: int, backoff_s: float, concurrency: int) -> Any:
    """A ``requests`` session for one endpoint: pooled connections, urllib3's retries."""
    import requests
    from requests.adapters import HTTPAdapter
    from urllib3.util.retry import Retry

    class CappedRetry(Retry):  # type: ignore[misc]
        def get_retry_after(self, response: Any) -> float | None:
            wait = super().get_retry_after(response)
            return None if wait is None else min(wait, MAX_RETRY_AFTER_S)

    retry = CappedRetry(
        total=retries,
        connect=retries,
        read=retries,
        status=retries,
        other=0,
        backoff_factor=backoff_s,
        status_forcelist=RETRY_STATUSES,
        allowed_methods=frozenset({"POST"}),  # scoring a batch again is harmless
        respect_retry_after_header=True,
        raise_on_status=False,  # the last answer is reported below
    )
    session = requests.Session()
    adapter = HTTPAdapter(max_retries=retry, pool_connections=1, pool_maxsize=concurrency)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


def _request_budget(config: RemoteRewardConfig) -> float:
    """The longest one request may take, its retries and their waits included: each try's
    ``timeout_s`` plus, before each retry, the longer of its backoff and a capped
    ``Retry-After``."""
    waits = sum(
        max(min(config.backoff_s * 2**k, _BACKOFF_MAX_S), MAX_RETRY_AFTER_S)
        for k in range(config.retries)
    )
    return (config.retries + 1) * config.timeout_s + waits


_BACKOFF_MAX_S = 120.0
"""urllib3's cap on one backoff wait (``Retry.DEFAULT_BACKOFF_MAX``)."""


def _post(config: RemoteRewardConfig, body: bytes) -> bytes:
    """The answer's body, within a deadline on the whole request.

    ``requests``' timeout bounds each socket read only: a server that sends a byte every
    half second never trips it. So the request runs on a daemon thread, waited for in
    short joins (a run's deadline lands between them), until :func:`_request_budget` has
    passed or, once the headers are in, ``timeout_s`` more; then its socket is shut down
    (which ends a blocked read) and the request fails.
    """
    box: dict[str, Any] = {}

    def attempt() -> None:
        try:
            box["content"] = _post_once(config, body, box)
        except BaseException as exc:  # re-raised in the calling thread
            box["error"] = exc

    start = time.monotonic()
    end = start + _request_budget(config)
    thread = threading.Thread(target=attempt, name="hfsdk-remote-request", daemon=True)
    thread.start()
    while thread.is_alive():
        now = time.monotonic()
        if "headers_at" in box:
            end = min(end, box["headers_at"] + config.timeout_s)
        if now >= end:
            answer = box.get("answer")
            if answer is not None:
                answer.raw.shutdown()  # the thread's read returns; it then ends
            raise HfsdkError(
                f"reward endpoint {config.url} did not answer within {end - start:.3g} s "
                f"(timeout_s={config.timeout_s:g} a try, retries={config.retries}); it may "
                "be overloaded or sending its answer slowly: check it, or raise timeout_s"
            )
        thread.join(min(0.1, end - now))
    if "error" in box:
        raise box["error"]
    return box["content"]


def _post_once(config: RemoteRewardConfig, body: bytes, box: dict[str, Any]) -> bytes:
    """Send the request (urllib3 retries it) and read the answer; ``box`` gets the response
    and when its headers came, for :func:`_post`'s deadline."""
    import requests

    session = _session(config.url, config.retries, config.backoff_s, config.concurrency)
    tries = config.retries + 1
    try:
        answer = session.post(
            config.url,
            data=body,
            headers={"Content-Type": "application/json"},
            timeout=config.timeout_s,
            allow_redirects=False,  # the batch goes to the configured endpoint only
            stream=True,
        )
        box["answer"], box["headers_at"] = answer, time.monotonic()
        if answer.status_code < 300:
            content = _bounded_content(config, answer)
        else:  # the start of the body: an endpoint's reason for a 4xx, quoted below
            content = next(answer.iter_content(ERROR_BODY_BYTES), b"")[:ERROR_BODY_BYTES]
            answer.close()
    except requests.RequestException as exc:
        reason = exc.args[0] if exc.args else exc
        reason = getattr(reason, "reason", None) or reason
        raise HfsdkError(
            f"reward endpoint {config.url} failed {tries} times (last: "
            f"{type(reason).__name__}: {reason}); check that it is running and reachable, or "
            "raise timeout_s / retries"
        ) from None
    if answer.status_code in RETRY_STATUSES:
        raise HfsdkError(
            f"reward endpoint {config.url} failed {tries} times (last: HTTP "
            f"{answer.status_code} {answer.reason}); check that it is running and reachable, "
            "or raise timeout_s / retries"
        )
    if answer.status_code >= 300:
        text = content.decode("utf-8", errors="replace").strip()
        said = f" ({text!r})" if text else ""
        raise HfsdkError(
            f"reward endpoint {config.url} answered HTTP {answer.status_code} {answer.reason}"
            f"{said}; check the URL and what the endpoint expects "
            "(docs/rewards.md#remote-reward-endpoints)"
        )
    return content


def _bounded_content(config: RemoteRewardConfig, answer: Any) -> bytes:
    """The answer's body, refused past :data:`MAX_ANSWER_BYTES`."""
    parts, size = [], 0
    for part in answer.iter_content(1 << 16):
        size += len(part)
        if size > MAX_ANSWER_BYTES:
            answer.close()
            raise HfsdkError(
                f"reward endpoint {config.url} answered more than {MAX_ANSWER_BYTES >> 20} MiB; "
                'it must answer {"scores": [...]} with one score per sample'
            )
        parts.append(part)
    return b"".join(parts)


def _scores(config: RemoteRewardConfig, raw: bytes, expected: int) -> list[Any]:
    try:
        parsed = json.loads(raw)
    except (ValueError, RecursionError):  # also a 5000-digit number or deep nesting
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
    # allow_nan=False: a non-finite value that _jsonable missed fails here, in this process,
    # rather than at the endpoint as invalid JSON.
    return _scores(config, _post(config, json.dumps(payload, allow_nan=False).encode()), size)


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
    parts = _fan_out(lambda chunk: _request(config, *chunk), chunks, config.concurrency)
    return [score for part in parts for score in part]


def _fan_out(fn: Any, items: Sequence[Any], workers: int) -> list[Any]:
    """``[fn(item) for item in items]`` on up to ``workers`` daemon threads.

    Not a ``ThreadPoolExecutor``: when the run's reward deadline interrupts the caller,
    a request still hanging (a server that drips its answer) must not hold the caller in
    the pool's shutdown, nor the process at exit.
    """
    results: list[Any] = [None] * len(items)
    failures: list[BaseException] = []
    queue = list(enumerate(items))
    lock = threading.Lock()

    def work() -> None:
        while True:
            with lock:
                if not queue or failures:
                    return
                index, item = queue.pop(0)
            try:
                results[index] = fn(item)
            except BaseException as exc:
                failures.append(exc)
                return

    threads = [
        threading.Thread(target=work, name="hfsdk-remote-reward", daemon=True)
        for _ in range(min(workers, len(items)))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():  # short waits: a deadline lands between them in any thread
            thread.join(0.1)
    if failures:
        raise failures[0]
    return results
