"""The HTTP side: the routes the ``tinker`` SDK calls, on Starlette.

Request bodies are the SDK's own pydantic types (JSON) or protobuf
(``/forward_backward``); long operations answer with a request id (the SDK's
``UntypedAPIFuture``) and their result is fetched from ``/retrieve_future``.
A failed operation comes back as the API's ``RequestFailedResponse`` (the SDK
raises ``tinker.RequestFailedError`` with its one-line message); a malformed
request gets a 400 with one line. Nothing a client sends stops the server: any
error inside an operation is turned into a failed request and logged.

With an API key every route but the health check needs ``X-API-Key`` (the
header the SDK sends).
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import pydantic
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from tinker import types
from tinker.types.try_again_response import TryAgainResponse

from hfsdk import HfsdkError
from hfsdk_serve.futures import SHUTTING_DOWN, Futures, ShuttingDown
from hfsdk_serve.sampling import MAX_SAMPLES
from hfsdk_serve.service import Service, UnknownIdError
from hfsdk_serve.wire import PROTO_CONTENT_TYPE, decode_forward_backward

log = logging.getLogger(__name__)

Handler = Callable[[Request], Awaitable[Response]]


def _json(model: pydantic.BaseModel | dict[str, Any] | None, status: int = 200) -> Response:
    if isinstance(model, pydantic.BaseModel):
        body: Any = model.model_dump(mode="json", exclude_none=True)
    else:
        body = model
    return JSONResponse(body, status_code=status)


def _error(message: str, status: int = 400) -> Response:
    return JSONResponse({"error": message, "detail": message}, status_code=status)


def _shutting_down() -> Response:
    """A synchronous route's answer after the close: 410 (gone), which the SDK raises at
    once. A 503 it retries until its own timeout (tinker 0.38's retry handler retries every
    5xx, ``x-should-retry: false`` notwithstanding), and this server will not come back."""
    response = _error(SHUTTING_DOWN, 410)
    response.headers["x-should-retry"] = "false"
    return response


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _validation_message(exc: pydantic.ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err.get("loc", ())) or "body"
    return f"invalid request: {where}: {err.get('msg')} ({exc.error_count()} error(s))"


class TinkerApp:
    """The routes over one :class:`Service`; :attr:`asgi` is the ASGI application."""

    def __init__(self, service: Service, *, api_key: str | None = None) -> None:
        self.service = service
        self.api_key = api_key
        self.futures = Futures()
        route = Route
        self.asgi = Starlette(
            routes=[
                route("/api/v1/healthz", self.healthz, methods=["GET"]),
                route("/api/v1/get_server_capabilities", self.capabilities, methods=["GET"]),
                route("/api/v1/client/config", self.client_config, methods=["POST"]),
                route("/api/v1/client/dynamic_config", self.dynamic_config, methods=["POST"]),
                route("/api/v1/create_session", self.create_session, methods=["POST"]),
                route("/api/v1/session_heartbeat", self.heartbeat, methods=["POST"]),
                route(
                    "/api/v1/sessions/{session_id}/finish", self.finish_session, methods=["POST"]
                ),
                route("/api/v1/telemetry", self.telemetry, methods=["POST"]),
                route("/api/v1/create_model", self.create_model, methods=["POST"]),
                route("/api/v1/get_info", self.get_info, methods=["POST"]),
                route("/api/v1/forward_backward", self.forward_backward, methods=["POST"]),
                route("/api/v1/optim_step", self.optim_step, methods=["POST"]),
                route("/api/v1/save_weights", self.save_weights, methods=["POST"]),
                route("/api/v1/load_weights", self.load_weights, methods=["POST"]),
                route("/api/v1/save_weights_for_sampler", self.save_for_sampler, methods=["POST"]),
                route("/api/v1/create_sampling_session", self.create_sampler, methods=["POST"]),
                route("/api/v1/samplers/{sampler_id}", self.get_sampler, methods=["GET"]),
                route("/api/v1/asample", self.asample, methods=["POST"]),
                route("/api/v1/retrieve_future", self.retrieve_future, methods=["POST"]),
                route("/api/v1/cancel_future", self.cancel_future, methods=["POST"]),
            ],
            exception_handlers={_BadRequest: _bad_request},
        )
        self.asgi.add_middleware(_KeyCheck, app_obj=self)

    def close(self) -> None:
        """Stop the model thread after the queued work, then the worker group."""
        self.futures.close(wait=True)
        self.service.close()

    # -- helpers ---------------------------------------------------------------------------

    async def _body(self, request: Request, model: type[pydantic.BaseModel]) -> Any:
        try:
            return model.model_validate_json(await request.body())
        except pydantic.ValidationError as exc:
            raise _BadRequest(_validation_message(exc)) from None

    def _submit(
        self,
        fn: Callable[..., Any],
        *args: Any,
        model_id: str | None = None,
        samples: int | None = None,
    ) -> Response:
        try:
            request_id = self.futures.submit(_guarded(fn), *args)
        except ShuttingDown:  # answered as a failed request: the SDK raises it at once
            request_id = self.futures.finished(
                _Failure(SHUTTING_DOWN, types.RequestErrorCategory.Server)
            )
        future = types.UntypedAPIFuture(
            request_id=request_id,
            model_id=model_id,
            sample_sequence_ids=[f"{request_id}_{i}" for i in range(samples)] if samples else None,
        )
        return _json(future)

    async def _direct(self, fn: Callable[..., Any], *args: Any) -> Response:
        """Run ``fn`` on the model thread and answer with its result (404 for an id this
        server does not hold, 400 on another user error)."""
        try:
            return _json(await self.futures.run(fn, *args))
        except HfsdkError as exc:
            return _error(_first_line(exc), 404 if isinstance(exc, UnknownIdError) else 400)
        except ShuttingDown:
            return _shutting_down()

    # -- routes ----------------------------------------------------------------------------

    async def healthz(self, request: Request) -> Response:
        return _json({"status": "ok"})

    async def capabilities(self, request: Request) -> Response:
        return _json(self.service.capabilities())

    async def client_config(self, request: Request) -> Response:
        # Plain API keys, httpx transport, per-request polling, client-side custom losses.
        return _json(
            types.ClientConfigResponse(
                pjwt_auth_enabled=False,
                use_pyqwest_transport=False,
                sample_use_retrieve_futures=False,
                custom_loss_server_side=False,
                sample_join_sampling_session=False,
                proto_compress_fwdbwd=False,
            )
        )

    async def dynamic_config(self, request: Request) -> Response:
        return _json(types.ClientDynamicConfigResponse())

    async def create_session(self, request: Request) -> Response:
        await self._body(request, types.CreateSessionRequest)
        return _json(types.CreateSessionResponse(session_id=self.service.create_session()))

    async def heartbeat(self, request: Request) -> Response:
        return _json(types.SessionHeartbeatResponse())

    async def finish_session(self, request: Request) -> Response:
        # On the model thread: after the session's queued work, and never beside an operation.
        return await self._direct(self.service.finish_session, request.path_params["session_id"])

    async def telemetry(self, request: Request) -> Response:
        return _json({"status": "accepted"})

    async def create_model(self, request: Request) -> Response:
        body = await self._body(request, types.CreateModelRequest)
        return self._submit(self.service.create_model, body)

    async def get_info(self, request: Request) -> Response:
        body = await self._body(request, types.GetInfoRequest)
        return await self._direct(self.service.get_info, body)

    async def forward_backward(self, request: Request) -> Response:
        raw = await request.body()
        if request.headers.get("content-encoding") == "zstd":
            import zstandard

            try:
                raw = zstandard.ZstdDecompressor().decompress(raw)
            except zstandard.ZstdError as exc:
                raise _BadRequest(f"the zstd-encoded body does not decompress: {exc}") from None
        try:
            body = decode_forward_backward(raw)
        except HfsdkError as exc:
            raise _BadRequest(_first_line(exc)) from None
        return self._submit(self.service.forward_backward, body, model_id=body.model_id)

    async def optim_step(self, request: Request) -> Response:
        body = await self._body(request, types.OptimStepRequest)
        return self._submit(self.service.optim_step, body, model_id=body.model_id)

    async def save_weights(self, request: Request) -> Response:
        body = await self._body(request, types.SaveWeightsRequest)
        return self._submit(self.service.save_weights, body, model_id=body.model_id)

    async def load_weights(self, request: Request) -> Response:
        body = await self._body(request, types.LoadWeightsRequest)
        return self._submit(self.service.load_weights, body, model_id=body.model_id)

    async def save_for_sampler(self, request: Request) -> Response:
        body = await self._body(request, types.SaveWeightsForSamplerRequest)
        return self._submit(self.service.save_weights_for_sampler, body, model_id=body.model_id)

    async def create_sampler(self, request: Request) -> Response:
        body = await self._body(request, types.CreateSamplingSessionRequest)
        return await self._direct(self.service.create_sampling_session, body)

    async def get_sampler(self, request: Request) -> Response:
        return await self._direct(self.service.get_sampler, request.path_params["sampler_id"])

    async def asample(self, request: Request) -> Response:
        body = await self._body(request, types.SampleRequest)
        if not 1 <= body.num_samples <= MAX_SAMPLES:
            raise _BadRequest(
                f"num_samples={body.num_samples}; expected 1 to {MAX_SAMPLES} (one request holds "
                "the model for all of them; send several for more)"
            )
        return self._submit(self.service.sample, body, samples=body.num_samples)

    async def retrieve_future(self, request: Request) -> Response:
        body = await self._body(request, types.FutureRetrieveRequest)
        if not self.futures.known(body.request_id):
            # 404 is final for the SDK (410 would make it resend the original request).
            return _error(f"unknown request id {body.request_id!r} (expired or never sent)", 404)
        future = await self.futures.wait(body.request_id)
        if future is None:
            return _json(TryAgainResponse(request_id=body.request_id, queue_state="active"))
        if future.cancelled():  # only close() cancels: the server is going away
            return _json(
                types.RequestFailedResponse(
                    error=SHUTTING_DOWN, category=types.RequestErrorCategory.Server
                )
            )
        outcome = future.result()
        if isinstance(outcome, _Failure):
            return _json(
                types.RequestFailedResponse(error=outcome.message, category=outcome.category)
            )
        if isinstance(outcome, bytes):
            return Response(outcome, media_type=PROTO_CONTENT_TYPE)
        return _json(outcome)

    async def cancel_future(self, request: Request) -> Response:
        return _json({})


class _BadRequest(Exception):
    """A request the server cannot parse: answered with a 400 and this one line."""


async def _bad_request(request: Request, exc: Exception) -> Response:
    return _error(str(exc), 400)


class _Failure:
    """A failed operation's outcome (what ``/retrieve_future`` reports)."""

    def __init__(self, message: str, category: types.RequestErrorCategory) -> None:
        self.message = message
        self.category = category


def _guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with its errors turned into a :class:`_Failure` (user errors: one line)."""

    def run(*args: Any) -> Any:
        try:
            return fn(*args)
        except HfsdkError as exc:
            return _Failure(_first_line(exc), types.RequestErrorCategory.User)
        except Exception as exc:  # the server must outlive any request
            log.exception("hfsdk serve: %s failed", getattr(fn, "__name__", fn))
            return _Failure(
                f"internal error in {getattr(fn, '__name__', 'the operation')}: "
                f"{type(exc).__name__}: {_first_line(exc)}",
                types.RequestErrorCategory.Server,
            )

    return run


class _KeyCheck:
    """ASGI middleware: every route but the health check needs the API key (when one is set)."""

    def __init__(self, app: Any, app_obj: TinkerApp) -> None:
        self.app = app
        self.owner = app_obj

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        key = self.owner.api_key
        if key is not None and scope.get("path") != "/api/v1/healthz":
            # Bytes, not str: compare_digest refuses non-ASCII strings (a 500, not a 401).
            sent = dict(scope.get("headers") or []).get(b"x-api-key", b"")
            if not hmac.compare_digest(sent, key.encode()):
                response = _error(
                    "missing or wrong API key: send the server's key (ServiceClient(api_key=...) "
                    "or TINKER_API_KEY)",
                    401,
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
