"""Request-level generation on the colocated vLLM engine: its own continuous batching.

:class:`VLLMRequestServer` drives the engine of one actor rank from asyncio:
requests that arrive are handed to the engine (``LLM.enqueue``: added, not
run) and a step loop calls ``LLMEngine.step()`` while any request is
unfinished, so vLLM's scheduler batches whatever is running and requests join
and leave between steps. Every engine call happens in one worker thread
(the engine is not thread-safe; the event loop stays free for tools).

vLLM 0.32 offline offers no asyncio engine in this process (``AsyncLLM``
starts its engine core in another process, which would hold a second copy of
the weights); ``enqueue`` + ``step`` on the in-process ``LLMEngine`` is its
request-level interface.

Log-probs: the engine's ``logprobs_mode`` is fixed when it is built (from
``rollout.temperature``, :meth:`VLLMRolloutConfig.logprobs_mode`). A request's
log-probs are the contract's (temperature only) when that mode gives them:
raw log-probs for greedy and temperature-1 requests, processed ones for a
request at the configured temperature without top-p or top-k; others get NaN (the
trainer then relies on the actor's log-probs). Prompt log-probs (temperature 1)
are the engine's when its mode is ``raw_logprobs``, else NaN.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import math
import time
from typing import TYPE_CHECKING, Any

import attrs

from hfsdk import GenerationRequest, GenerationResult, HfsdkError
from hfsdk_backend_common import require_loaded
from hfsdk_rollout_vllm.requests import stop_settings

if TYPE_CHECKING:
    from collections.abc import Iterator

    from hfsdk_rollout_vllm.engine import ColocatedEngine
    from hfsdk_rollout_vllm.vllm_config import VLLMRolloutConfig


@attrs.define(kw_only=True)
class VLLMServerStats:
    """Engine steps, wall seconds inside them, tokens produced, requests served, peak running."""

    steps: int = 0
    busy_s: float = 0.0
    tokens: int = 0
    requests: int = 0
    peak_batch: int = 0


def request_params(config: VLLMRolloutConfig, eos_ids: list[int], request: GenerationRequest,
                   seed: int) -> Any:  # fmt: skip
    """vLLM's ``SamplingParams`` of one request (the model's defaults never apply)."""
    from vllm import SamplingParams

    common: dict[str, Any] = {
        "max_tokens": request.max_new_tokens,
        **stop_settings([*eos_ids, *request.stop_token_ids]),
        "logprobs": 0,  # the sampled token's own log-prob
        "detokenize": False,
    }
    if request.prompt_logprobs:
        common["prompt_logprobs"] = 0  # each prompt token's own log-prob
    if request.is_greedy:
        return SamplingParams(temperature=0.0, **common)
    return SamplingParams(temperature=request.temperature, top_p=request.top_p,
                          top_k=request.top_k, seed=seed, **common)  # fmt: skip


def logprobs_match(config: VLLMRolloutConfig, request: GenerationRequest) -> bool:
    """Whether the engine's log-probs are the contract's for ``request`` (see the module)."""
    if config.logprobs_mode() == "raw_logprobs":
        return request.logprob_temperature == 1.0
    # processed_logprobs are taken after top-k/top-p too: renormalised over the kept tokens.
    return request.temperature == config.temperature and request.top_p == 1.0 and request.top_k == 0


class VLLMRequestServer:
    """Serves :class:`GenerationRequest` s on one :class:`ColocatedEngine`, many in flight."""

    def __init__(self, engine: ColocatedEngine, config: VLLMRolloutConfig,
                 eos_ids: list[int]) -> None:  # fmt: skip
        self.engine, self.config, self.eos_ids = engine, config, list(eos_ids)
        self.stats = VLLMServerStats()
        self._pending: list[tuple[GenerationRequest, asyncio.Future, int]] = []
        # vLLM's request id -> (request, future, vLLM's internal id: to abort on close)
        self._running: dict[str, tuple[GenerationRequest, asyncio.Future, str]] = {}
        self._task: asyncio.Task | None = None
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="hfsdk-vllm-requests"
        )
        self._closed = False

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        """The request's tokens, log-probs and finish reason once vLLM finishes it."""
        if self._closed:
            raise HfsdkError("the vLLM request server is closed; the rollout was closed")
        self._check_fits(request)
        import torch

        loop = asyncio.get_running_loop()
        seed = request.seed if request.seed is not None else int(torch.randint(2**31 - 1, (1,)))
        future = loop.create_future()
        self._pending.append((request, future, seed))
        self.stats.requests += 1
        if self._task is None or self._task.done() or self._task.get_loop() is not loop:
            self._task = loop.create_task(self._run())
        return await future

    def close(self) -> None:
        """Fail what is waiting, abort what runs and stop the worker thread."""
        self._closed = True
        error = HfsdkError("the vLLM request server closed while this request was in flight")
        for _, future, _ in [*self._pending, *self._running.values()]:
            if not future.done():
                future.get_loop().call_soon_threadsafe(_fail, future, error)
        running = [internal for _, _, internal in self._running.values()]
        self._pending, self._running = [], {}
        if running:
            self._executor.submit(self.engine.llm.llm_engine.abort_request, running, True)
        self._executor.shutdown(wait=True)

    def _check_fits(self, request: GenerationRequest) -> None:
        """Refuse a prompt the engine cannot hold, or sampling settings vLLM refuses (a
        temperature over 2), here, for this request only.

        vLLM rejects them inside ``enqueue``, in the step that also serves every other
        request in flight, which would fail them all.
        """
        from vllm.exceptions import VLLMClientError

        try:  # SamplingParams validates itself when built: cheap, and vLLM's own rules
            request_params(self.config, self.eos_ids, request, 0)
        except (VLLMClientError, ValueError) as exc:
            raise HfsdkError(
                f"vLLM refuses this request's sampling settings ({exc}); send settings in "
                "vLLM's ranges (temperature at most 2)"
            ) from None
        limit = self.engine.llm.llm_engine.model_config.max_model_len
        if len(request.prompt_ids) >= limit:  # vLLM needs room for one generated token
            raise HfsdkError(
                f"the request's prompt has {len(request.prompt_ids)} tokens but the vLLM engine "
                f"holds at most {limit - 1} (its max_model_len {limit} is "
                "rollout.max_prompt_length + rollout.max_response_length, less one token to "
                "generate); shorten the prompt or raise rollout.max_prompt_length"
            )

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        joiners: list[tuple[GenerationRequest, asyncio.Future, int]] = []
        try:
            while (self._pending or self._running) and not self._closed:
                # Clients that gave up (cancelled futures) are not enqueued, or are aborted.
                joiners = [j for j in self._pending if not j[1].done()]
                self._pending = []
                gone = [key for key, (_, future, _) in self._running.items() if future.done()]
                step = self._executor.submit(self._step, joiners, gone)
                finished = await asyncio.wrap_future(step, loop=loop)
                for future, result in finished:
                    if not future.done():
                        future.set_result(result)
        except BaseException as error:  # cancelled (the loop ends) or a failed step
            self._stop_all(error, [future for _, future, _ in joiners])
            if not isinstance(error, Exception):
                raise

    def _stop_all(self, error: BaseException, joined: list[asyncio.Future]) -> None:
        """Abort every request of this server in the engine, then fail (or cancel) its waiters.

        The abort runs in the worker thread, so after a step still in flight (one worker,
        in order), and this blocks until it is done: once control returns, nothing drives
        the engine and no request of this server is left in it, where vLLM's next
        ``LLM.generate`` would return its output among a batch's rows.
        """
        waiters = [*joined, *(future for _, future, _ in self._pending)]
        self._pending = []
        if not self._closed:  # close() aborted what ran and shut the worker down
            with contextlib.suppress(RuntimeError):  # the worker was shut down meanwhile
                waiters += self._executor.submit(self._abort_running).result()
        for future in waiters:
            if isinstance(error, Exception):
                _fail(future, error)
            elif not future.done():
                future.cancel()

    def _abort_running(self) -> list[asyncio.Future]:
        """(Worker thread) Abort the running requests in the engine; their futures."""
        running, self._running = self._running, {}
        if running:
            internal = [internal for _, _, internal in running.values()]
            self.engine.llm.llm_engine.abort_request(internal, internal=True)
        return [future for _, future, _ in running.values()]

    def _step(
        self, joiners: list[tuple[GenerationRequest, asyncio.Future, int]], gone: list[str]
    ) -> list:
        """Abort the ``gone`` requests (their clients gave up), add the joiners, run one
        engine step, return the finished (future, result)s."""
        started = time.perf_counter()
        llm = self.engine.llm
        if gone:
            internal = [self._running.pop(key)[2] for key in gone]
            llm.llm_engine.abort_request(internal, internal=True)
        if not joiners and not self._running:
            return []  # every client gave up: nothing to step
        if joiners:
            self.engine.wake_up()
            prompts = [{"prompt_token_ids": list(r.prompt_ids)} for r, _, _ in joiners]
            params = [request_params(self.config, self.eos_ids, r, s) for r, _, s in joiners]
            internal = llm.enqueue(prompts, params, use_tqdm=False)
            for request_id, (request, future, _) in zip(internal, joiners, strict=True):
                # enqueue returns vLLM's internal ids ("<id>-<suffix>"); outputs carry <id>.
                self._running[request_id.rsplit("-", 1)[0]] = (request, future, request_id)
        self.stats.peak_batch = max(self.stats.peak_batch, len(self._running))
        done = []
        for output in llm.llm_engine.step():
            if not output.finished or output.request_id not in self._running:
                continue
            request, future, _ = self._running.pop(output.request_id)
            done.append((future, self._result(request, output)))
        if self._running and not llm.llm_engine.has_unfinished_requests():
            raise HfsdkError(
                f"vLLM finished every request but {len(self._running)} were not matched to "
                f"their outputs (ids {sorted(self._running)[:3]}); the engine's request ids "
                "changed format"
            )
        self.stats.steps += 1
        self.stats.busy_s += time.perf_counter() - started
        return done

    def _result(self, request: GenerationRequest, output: Any) -> GenerationResult:
        completion = output.outputs[0]
        tokens = list(completion.token_ids)
        self.stats.tokens += len(tokens)
        if logprobs_match(self.config, request) and completion.logprobs:
            pairs = zip(tokens, completion.logprobs, strict=True)
            logprobs = [float(entry[token].logprob) for token, entry in pairs]
        else:
            logprobs = [math.nan] * len(tokens)
        stops = set(self.eos_ids) | set(request.stop_token_ids)
        reason = "stop" if tokens and tokens[-1] in stops else "length"
        return GenerationResult(
            token_ids=tokens,
            logprobs=logprobs,
            finish_reason=reason,
            prompt_logprobs=self._prompt_logprobs(request, output),
        )

    def _prompt_logprobs(self, request: GenerationRequest, output: Any) -> list[float] | None:
        """The prompt's log-probs after its first token (NaN unless the engine's are raw)."""
        if not request.prompt_logprobs:
            return None
        prompt = list(request.prompt_ids)
        entries = list(output.prompt_logprobs or [])[1:]  # vLLM's first entry is None
        if self.config.logprobs_mode() != "raw_logprobs" or len(entries) != len(prompt) - 1:
            return [math.nan] * (len(prompt) - 1)
        pairs = zip(prompt[1:], entries, strict=True)
        return [float(entry[token].logprob) for token, entry in pairs]


def _fail(future: asyncio.Future, error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)


class ServesRequests:
    """The request-level side of both vLLM rollouts (mixed in before ``HFRollout``).

    The engine keeps its own copy of the weights, so serving holds nothing
    extra: :meth:`serving` only makes the weights current (a shard-fed engine
    whose actor changed reloads, collectively) and lets the KV cache sleep
    after; requests outside it are served too (the server starts lazily).
    Don't run ``generate_sequences`` while requests are in flight: both drive
    the same engine.
    """

    config: VLLMRolloutConfig
    eos_ids: list[int]
    actor: Any
    loaded_version: int
    _request_server: VLLMRequestServer | None = None

    @property
    def serves_requests(self) -> bool:
        """vLLM batches requests continuously (at generation tp 1, see ``_ready_for_requests``)."""
        return True

    def _vllm_engine(self) -> ColocatedEngine:
        """The engine requests go to."""
        raise NotImplementedError

    def _ready_for_requests(self, *, collective: bool) -> None:
        """Make the engine's weights current (``collective``: every rank of the actor is here)."""

    def _require_current(self) -> None:
        """Refuse a request while the engine's weights are not the actor's (a skipped reload)."""
        require_loaded(self.loaded_version, self.actor.weights_version, "the vLLM engine")

    @contextlib.contextmanager
    def serving(self) -> Iterator[None]:
        """Every rank enters it: the engine's weights are made current once for the requests."""
        self._ready_for_requests(collective=True)
        try:
            yield
        finally:
            self._vllm_engine().sleep()  # the actor trains next (CUDA: KV cache released)

    async def generate_request(self, request: GenerationRequest) -> GenerationResult:
        """Serve ``request`` with vLLM's continuous batching (many may be in flight)."""
        if self._request_server is None:
            self._ready_for_requests(collective=False)
            self._request_server = VLLMRequestServer(self._vllm_engine(), self.config, self.eos_ids)
        self._require_current()  # every request: the actor may have moved on since the start
        return await self._request_server.generate(request)

    @property
    def request_server(self) -> VLLMRequestServer | None:
        """The request server (its ``stats``), once a request started it."""
        return self._request_server

    def _close_requests(self) -> None:
        server, self._request_server = self._request_server, None
        if server is not None:
            server.close()
