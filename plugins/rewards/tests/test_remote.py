"""The ``remote`` reward against a real HTTP server on the loopback address."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from hfsdk.core.errors import HfsdkError
from hfsdk_rewards import compute_rewards
from hfsdk_rewards.remote import RemoteRewardConfig, remote_reward

Behaviour = Callable[[BaseHTTPRequestHandler, dict], None]


def _answer(handler: BaseHTTPRequestHandler, status: int, body: bytes) -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def length_scores(handler: BaseHTTPRequestHandler, payload: dict) -> None:
    scores = [{"score": float(len(r)), "chars": len(r)} for r in payload["responses"]]
    _answer(handler, 200, json.dumps({"scores": scores}).encode())


@pytest.fixture
def server() -> Iterator[Callable[[Behaviour], str]]:
    """Start a server whose handler does what the test says; yields a function -> its URL."""
    servers: list[ThreadingHTTPServer] = []
    calls: list[dict] = []

    def start(behaviour: Behaviour) -> str:
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, so a client can reuse a connection

            def do_POST(self) -> None:
                payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                calls.append(payload)
                behaviour(self, payload)

            def log_message(self, *args: object) -> None:
                pass

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # A client that timed out breaks the pipe on purpose: the server thread's report of it
        # would land, whenever it ran, in a later test's captured stderr.
        httpd.handle_error = lambda request, address: None  # type: ignore[method-assign]
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        servers.append(httpd)
        return f"http://127.0.0.1:{httpd.server_address[1]}/score"

    start.calls = calls  # type: ignore[attr-defined]
    yield start
    for httpd in servers:
        httpd.shutdown()
        httpd.server_close()


def test_scores_come_back_in_order_in_batches(server) -> None:
    url = server(length_scores)
    config = RemoteRewardConfig(url=url, batch_size=2, concurrency=2)
    responses = ["a", "bbb", "cc", "dddd", "e"]
    scores = remote_reward(["p"] * 5, responses, config=config, answer=list("vwxyz"))
    assert [s["score"] for s in scores] == [1.0, 3.0, 2.0, 4.0, 1.0]
    assert len(server.calls) == 3  # 2 + 2 + 1
    assert {tuple(c["columns"]["answer"]) for c in server.calls} == {("v", "w"), ("x", "y"), ("z",)}


def test_a_url_entry_in_the_reward_section_uses_it(server) -> None:
    url = server(length_scores)
    scores, metrics = compute_rewards(["p", "p"], ["ab", "abcd"], {}, {"functions": [{"url": url}]})
    assert list(scores) == [2.0, 4.0]
    assert metrics["remote/chars"] == 3.0


def _constant(value: float) -> Behaviour:
    def answer(handler: BaseHTTPRequestHandler, payload: dict) -> None:
        _answer(handler, 200, json.dumps({"scores": [value] * len(payload["responses"])}).encode())

    return answer


def test_two_url_entries_log_remote_and_remote_2(server) -> None:
    config = {"functions": [{"url": server(_constant(1.0))}, {"url": server(_constant(5.0))}]}
    _, metrics = compute_rewards(["p", "q"], ["a", "b"], {}, config)
    assert {k: v for k, v in metrics.items() if k.startswith("remote")} == {
        "remote": 1.0,
        "remote#2": 5.0,
    }


def test_a_url_entry_and_a_file_function_named_remote_keep_their_own_means(
    server, tmp_path
) -> None:
    path = tmp_path / "userfns.py"
    path.write_text(
        "def remote(prompts, responses, **columns):\n    return [0.0] * len(responses)\n"
    )
    config = {"functions": [{"url": server(_constant(5.0))}, {"name": f"{path}:remote"}]}
    _, metrics = compute_rewards(["p", "q"], ["a", "b"], {}, config)
    assert metrics["remote"] == 5.0
    assert metrics[f"{path}:remote"] == 0.0


def test_a_slow_server_is_retried_then_succeeds(server) -> None:
    attempts: list[float] = []

    def slow_once(handler: BaseHTTPRequestHandler, payload: dict) -> None:
        attempts.append(time.perf_counter())
        if len(attempts) == 1:
            time.sleep(1.0)  # longer than the client's timeout
        length_scores(handler, payload)

    config = RemoteRewardConfig(url=server(slow_once), timeout_s=0.3, retries=2, backoff_s=0.05)
    assert [s["score"] for s in remote_reward(["p"], ["xyz"], config=config)] == [3.0]
    assert len(attempts) == 2


def test_a_5xx_answer_is_retried(server) -> None:
    seen: list[int] = []

    def flaky(handler: BaseHTTPRequestHandler, payload: dict) -> None:
        seen.append(1)
        if len(seen) < 3:
            _answer(handler, 503, b"busy")
        else:
            length_scores(handler, payload)

    config = RemoteRewardConfig(url=server(flaky), retries=3, backoff_s=0.01)
    assert [s["score"] for s in remote_reward(["p"], ["ab"], config=config)] == [2.0]
    assert len(seen) == 3


def test_a_server_that_is_down_fails_with_one_line_after_the_retries() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/score"
    config = RemoteRewardConfig(url=url, retries=2, backoff_s=0.01, timeout_s=1.0)
    with pytest.raises(HfsdkError, match=rf"reward endpoint {url} failed 3 times .*running and"):
        remote_reward(["p"], ["ab"], config=config)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"<html>oops</html>", r"answered something that is not JSON"),
        (b'{"scores": [1.0, 2.0]}', r"answered 2 scores for 1 samples"),
        (b'{"scores": ["high"]}', r"answered the score 'high'"),
        (b'{"result": 1}', r"answered NoneType for 1 samples"),
    ],
)
def test_garbage_is_one_clear_error_naming_the_endpoint(server, body: bytes, message: str) -> None:
    url = server(lambda handler, payload: _answer(handler, 200, body))
    with pytest.raises(HfsdkError, match=rf"reward endpoint {url} {message}"):
        remote_reward(["p"], ["ab"], config=RemoteRewardConfig(url=url, retries=0))


def test_a_4xx_answer_is_not_retried(server) -> None:
    seen: list[int] = []

    def missing(handler: BaseHTTPRequestHandler, payload: dict) -> None:
        seen.append(1)
        _answer(handler, 404, b"{}")

    url = server(missing)
    with pytest.raises(HfsdkError, match=r"answered HTTP 404"):
        remote_reward(["p"], ["ab"], config=RemoteRewardConfig(url=url, retries=3))
    assert len(seen) == 1


def test_a_bad_url_is_refused_in_the_config() -> None:
    with pytest.raises(ValueError, match=r"is not an http\(s\) URL"):
        RemoteRewardConfig(url="ftp://example/score")


def test_a_429_is_retried_after_what_retry_after_asks(server) -> None:
    attempts: list[float] = []

    def busy_once(handler: BaseHTTPRequestHandler, payload: dict) -> None:
        attempts.append(time.perf_counter())
        if len(attempts) == 1:
            handler.send_response(429)
            handler.send_header("Retry-After", "1")
            handler.send_header("Content-Length", "0")
            handler.end_headers()
        else:
            length_scores(handler, payload)

    config = RemoteRewardConfig(url=server(busy_once), retries=2, backoff_s=0.01)
    assert [s["score"] for s in remote_reward(["p"], ["abc"], config=config)] == [3.0]
    assert len(attempts) == 2 and attempts[1] - attempts[0] >= 0.95  # not the 0.01 s backoff


def test_a_429_that_persists_fails_with_one_line(server) -> None:
    def always_busy(handler: BaseHTTPRequestHandler, payload: dict) -> None:
        handler.send_response(429)
        handler.send_header("Retry-After", "0")
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    url = server(always_busy)
    with pytest.raises(HfsdkError, match=rf"{url} failed 2 times \(last: HTTP 429 Too Many"):
        remote_reward(["p"], ["ab"], config=RemoteRewardConfig(url=url, retries=1))
    assert len(server.calls) == 2


def test_connections_are_pooled_across_requests(server) -> None:
    ports: list[int] = []

    def record(handler: BaseHTTPRequestHandler, payload: dict) -> None:
        ports.append(handler.client_address[1])
        length_scores(handler, payload)

    config = RemoteRewardConfig(url=server(record), batch_size=1, concurrency=1)
    for _ in range(3):
        remote_reward(["p", "p"], ["a", "bb"], config=config)
    # Six requests over one kept-alive connection (urllib opened one per request).
    assert len(ports) == 6 and len(set(ports)) == 1


def test_a_server_that_drips_its_answer_is_stopped_at_the_runs_deadline(server) -> None:
    def drip(handler: BaseHTTPRequestHandler, payload: dict) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", "1000")
        handler.end_headers()
        for _ in range(1000):  # a byte every 0.1 s: no single read ever times out
            handler.wfile.write(b" ")
            handler.wfile.flush()
            time.sleep(0.1)

    url = server(drip)
    start = time.perf_counter()
    with pytest.raises(HfsdkError, match="timeout_s"):
        compute_rewards(
            ["p"], ["abc"], {},
            {"functions": [{"url": url, "kwargs": {"timeout_s": 1, "retries": 0}}], "timeout_s": 2},
        )  # fmt: skip
    assert time.perf_counter() - start < 15  # the deadline, not the 100 s the body takes


def test_a_retry_after_of_a_day_is_capped(server, monkeypatch: pytest.MonkeyPatch) -> None:
    from hfsdk_rewards import remote

    monkeypatch.setattr(remote, "MAX_RETRY_AFTER_S", 0.5)
    remote._session.cache_clear()
    attempts: list[float] = []

    def busy_once(handler: BaseHTTPRequestHandler, payload: dict) -> None:
        attempts.append(time.perf_counter())
        if len(attempts) == 1:
            handler.send_response(503)
            handler.send_header("Retry-After", "86400")
            handler.send_header("Content-Length", "0")
            handler.end_headers()
        else:
            length_scores(handler, payload)

    config = RemoteRewardConfig(url=server(busy_once), retries=1, backoff_s=0.01)
    assert [s["score"] for s in remote_reward(["p"], ["abc"], config=config)] == [3.0]
    assert attempts[1] - attempts[0] < 5


def test_answers_too_large_or_redirected_are_refused(server, monkeypatch) -> None:
    from hfsdk_rewards import remote

    monkeypatch.setattr(remote, "MAX_ANSWER_BYTES", 1000)

    def huge(handler: BaseHTTPRequestHandler, payload: dict) -> None:
        _answer(handler, 200, b" " * 5000)

    with pytest.raises(HfsdkError, match="answered more than 0 MiB"):
        remote_reward(["p"], ["abc"], config=RemoteRewardConfig(url=server(huge), retries=0))
    elsewhere = server(length_scores)

    def redirect(handler: BaseHTTPRequestHandler, payload: dict) -> None:
        handler.send_response(307)
        handler.send_header("Location", elsewhere)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    with pytest.raises(HfsdkError, match="answered HTTP 307"):
        remote_reward(["p"], ["abc"], config=RemoteRewardConfig(url=server(redirect), retries=0))


def test_non_finite_column_values_go_out_as_null(server) -> None:
    # NaN went out as a bare NaN, which JSON does not have: a strict parser (Go, JS, serde)
    # answered 400 and the run stopped.
    import numpy as np

    url = server(length_scores)
    columns = {
        "difficulty": [0.5, float("nan")],
        "extra": [{"w": float("inf")}, np.array([1.0, -np.inf])],
    }
    remote_reward(["p", "q"], ["a", "bb"], config=RemoteRewardConfig(url=url), **columns)
    [payload] = server.calls
    assert payload["columns"] == {"difficulty": [0.5, None], "extra": [{"w": None}, [1.0, None]]}


def test_a_4xx_answer_names_the_start_of_its_body(server) -> None:
    url = server(lambda handler, payload: _answer(handler, 400, b"invalid JSON constant NaN"))
    with pytest.raises(HfsdkError, match=r"answered HTTP 400 Bad Request") as caught:
        remote_reward(["p"], ["ab"], config=RemoteRewardConfig(url=url, retries=0))
    assert "'invalid JSON constant NaN'" in str(caught.value)


def test_timeout_s_bounds_a_whole_request_not_each_read(server) -> None:
    def drip(handler: BaseHTTPRequestHandler, payload: dict) -> None:
        body = b'{"scores": [1.0]}' + b" " * 200
        handler.send_response(200)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        for byte in body:  # a byte every 0.1 s: each read is well within timeout_s
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()
            time.sleep(0.1)

    config = RemoteRewardConfig(url=server(drip), timeout_s=0.5, retries=0)
    start = time.perf_counter()
    with pytest.raises(HfsdkError, match=r"did not answer within 0\.5 s"):
        remote_reward(["p"], ["r"], config=config)  # no run deadline around it
    assert time.perf_counter() - start < 5  # the 0.5 s timeout, not the 21 s the body takes
