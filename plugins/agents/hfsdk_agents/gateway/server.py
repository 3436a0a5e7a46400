"""The HTTP side: an OpenAI-compatible FastAPI app on 127.0.0.1, in a thread of its own.

Each session has its own base URL, ``http://127.0.0.1:PORT/s/<token>/v1``; a
request for a token the gateway did not open (or has closed) is a 404 with an
OpenAI-style error body. The server's event loop only parses and routes: each
request runs on the event loop of the rollout that opened its session (where
request-level generation lives), handed over with ``run_coroutine_threadsafe``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import socket
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from hfsdk import HfsdkError
from hfsdk_agents.gateway.errors import GatewayError, bad_request
from hfsdk_agents.gateway.responses import models
from hfsdk_agents.gateway.session import Session
from hfsdk_agents.gateway.streaming import chat_events, completion_events, include_usage

logger = logging.getLogger(__name__)

HOST = "127.0.0.1"


def _unknown(token: str) -> GatewayError:
    return GatewayError(
        404,
        f"no open session {token!r}: the gateway serves only the sessions it opened, at the "
        "base_url it handed to the agent",
        code="unknown_session",
    )


def build_app(sessions: dict[str, Session]) -> FastAPI:
    """The FastAPI app over ``sessions`` (token -> :class:`Session`)."""
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)

    def error(err: GatewayError) -> JSONResponse:
        return JSONResponse(err.body, status_code=err.status)

    async def on_loop(session: Session, work: Callable[[], Awaitable[Any]]) -> Any:
        async def run() -> Any:
            return await work()

        try:
            future = asyncio.run_coroutine_threadsafe(run(), session.loop)
        except RuntimeError:  # the rollout's loop is gone: the step ended
            raise _unknown(session.token) from None
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            # The rollout cancelled the work (its step ended while the turn generated): the
            # session is gone, as for any later request. This handler's own cancellation
            # (the client went away, the server stops) goes on up.
            task = asyncio.current_task()
            if not future.cancelled() or (task is not None and task.cancelling()):
                raise
            raise _unknown(session.token) from None

    async def body_of(request: Request) -> dict[str, Any]:
        raw = await request.body()
        try:
            body = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise bad_request("the request body is not JSON; send a JSON object") from None
        except RecursionError:  # valid JSON, but past what Python's decoder can nest
            raise bad_request(
                "the request body is too deeply nested for the JSON decoder; send a JSON "
                "object with fewer levels of nested arrays and objects"
            ) from None
        except ValueError:  # json.loads raises no other: an integer over the digit limit
            raise bad_request(
                "the request body has an integer too large to read (over "
                f"{sys.get_int_max_str_digits()} digits); send smaller numbers"
            ) from None
        if not isinstance(body, dict):
            raise bad_request("the request body must be a JSON object")
        return body

    async def serve(token: str, request: Request | None, kind: str) -> Response:
        session = sessions.get(token)
        try:
            if session is None:
                raise _unknown(token)
            session.check_open()
            if kind == "models":
                return JSONResponse(models(session.model))
            body = await body_of(request) if request is not None else {}
            stream = kind != "reward" and bool(body.get("stream"))
            usage = include_usage(body)
            if stream:  # generated whole, then sent as events (gateway/streaming.py)
                body = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
            if kind == "chat":
                out = await on_loop(session, lambda: session.chat(body))
            elif kind == "completions":
                out = await on_loop(session, lambda: session.complete(body))
            else:
                out = await on_loop(session, lambda: _post_reward(session, body))
            if stream:
                events = chat_events if kind == "chat" else completion_events
                return StreamingResponse(
                    events(out, include_usage=usage), media_type="text/event-stream"
                )
            return JSONResponse(out)
        except GatewayError as err:
            return error(err)
        except HfsdkError as err:
            return error(bad_request(str(err)))
        except Exception as err:  # the engine failed: the agent sees a 500, the run goes on
            logger.warning("gateway: %s failed: %s: %s", kind, type(err).__name__, err)
            return error(GatewayError(500, f"generation failed: {err}", code="server_error"))

    @app.get("/s/{token}/v1/models")
    async def list_models(token: str) -> JSONResponse:
        return await serve(token, None, "models")

    @app.post("/s/{token}/v1/chat/completions")
    async def chat(token: str, request: Request) -> Response:
        return await serve(token, request, "chat")

    @app.post("/s/{token}/v1/completions")
    async def completions(token: str, request: Request) -> Response:
        return await serve(token, request, "completions")

    @app.post("/s/{token}/reward")
    @app.post("/s/{token}/v1/reward")
    async def reward(token: str, request: Request) -> JSONResponse:
        return await serve(token, request, "reward")

    @app.api_route("/{path:path}", methods=["GET", "POST", "PUT", "DELETE", "PATCH"])
    async def anything_else(path: str) -> JSONResponse:
        prefix, _, endpoint = path.partition("/v1/")
        if path.startswith("s/") and endpoint and sessions.get(prefix[2:]) is not None:
            # A live session asked for an endpoint that is not served (the Responses API).
            return error(
                GatewayError(
                    404,
                    f"/v1/{endpoint} is not served; this gateway serves /chat/completions, "
                    "/completions and /models",
                    code="unsupported_endpoint",
                )
            )
        return error(
            GatewayError(
                404,
                f"/{path} is not served: use a session's base_url "
                "(http://127.0.0.1:PORT/s/<token>/v1) with /chat/completions, /completions "
                "or /models",
                code="unknown_session",
            )
        )

    return app


async def _post_reward(session: Session, body: dict[str, Any]) -> dict[str, Any]:
    value = body.get("reward")
    # JSON parsers accept NaN and Infinity; one such reward would poison the whole step.
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise bad_request(f"reward={value!r}; send {{'reward': <finite number>}}", param="reward")
    session.reward = float(value)
    return {"reward": session.reward}


class GatewayServer:
    """The loopback server; sessions are opened and closed by the gateway loop."""

    def __init__(self) -> None:
        import uvicorn

        self.sessions: dict[str, Session] = {}
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((HOST, 0))
        self.port = int(self._socket.getsockname()[1])
        config = uvicorn.Config(
            build_app(self.sessions),
            host=HOST,
            port=self.port,
            log_level="warning",
            access_log=False,
            lifespan="off",
            # Longer than any client's idle pool expiry (httpx: 5 s, uvicorn's default too):
            # a server closing an idle connection as the agent reuses it fails that request.
            timeout_keep_alive=3600,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [self._socket]},
            name="hfsdk-gateway",
            daemon=True,
        )
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise HfsdkError("the agent gateway's HTTP server did not start on 127.0.0.1")
            time.sleep(0.01)

    def url(self, session: Session) -> str:
        """The session's base URL (what the agent passes to ``openai.OpenAI(base_url=...)``)."""
        return f"http://{HOST}:{self.port}/s/{session.token}/v1"

    def open(self, session: Session) -> str:
        """Serve ``session``; its base URL."""
        self.sessions[session.token] = session
        return self.url(session)

    def close_session(self, session: Session) -> None:
        """Stop serving ``session`` (later requests get 404)."""
        session.active = False
        self.sessions.pop(session.token, None)

    def close(self) -> None:
        """Stop the server."""
        self._server.should_exit = True
        self._thread.join(timeout=5)
        self._socket.close()
