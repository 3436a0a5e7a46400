"""Request-level generation: continuous batching over the hfsdk KV-cache decoder.

:class:`RequestServer` serves :class:`hfsdk.GenerationRequest` s one at a
time with many in flight, on the asyncio event loop of the process that
awaits them (an actor worker running agent loops). A step loop runs while
there is work: before every decode step the requests that arrived join (their
prompts prefilled together), every active request gets one token, and the ones
that stopped leave and resolve their futures. A slow tool therefore holds up
only its own trajectory. The steps run in one worker thread, so the event loop
stays free for the tools and loops between and during steps.

The KV cache is one preallocated buffer per layer of (slots, kv heads,
capacity, head dim) (:class:`SlotCache`): each active request owns a slot;
the active requests always occupy slots ``0..n-1`` (a leaving request's slot
takes the last one's), so a decode step reads a view of the first ``n`` slots
and writes each request's new key/value at its own position. Buffers grow
(copying) when a request needs more slots or positions than they hold.

Each request samples with its own generator (seeded by ``request.seed``), its
own temperature, top-k (applied first, as transformers' ``generate`` does) and
top-p; its log-probs are taken at its temperature alone
(1 when greedy), before top-p; a request that asks for its prompt's log-probs
gets them from its prefill (temperature 1). Arithmetic per row is the decoder's, so a
greedy request's tokens are those of :meth:`TPDecoder.generate` on the same
prompt up to float rounding of the batched matmuls.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Iterable

import attrs
import torch

from hfsdk import GenerationRequest, GenerationResult, HfsdkError
from hfsdk_backend_common.hybrid.decoder import (
    TPDecoder,
    nucleus_filter,
    sample_rows,
    top_k_filter,
)


class SlotCache:
    """Per-slot keys and values of every layer, written at each row's own positions.

    Duck-types the decoder's ``KVCache`` for :meth:`TPDecoder.forward`: before
    a forward the server calls :meth:`bind` with the slots (a contiguous range)
    the batch's rows occupy, the positions their new tokens are written at and
    the key length attention reads; ``extend`` then writes and returns views.
    """

    def __init__(self, *, layers: range, kv_heads: int, head_dim: int, dtype: torch.dtype,
                 device: torch.device) -> None:  # fmt: skip
        self.layers, self.kv_heads, self.head_dim = layers, kv_heads, head_dim
        self.dtype, self.device = dtype, device
        self.slots = 0
        self.capacity = 0
        self._keys: dict[int, torch.Tensor] = {}
        self._values: dict[int, torch.Tensor] = {}
        self._rows = slice(0, 0)
        self._write: torch.Tensor | None = None
        self._key_len = 0

    def reserve(self, slots: int, capacity: int) -> None:
        """Room for at least ``slots`` requests of ``capacity`` positions (grows by doubling)."""
        if slots <= self.slots and capacity <= self.capacity:
            return
        new_slots = self.slots if slots <= self.slots else max(slots, 2 * self.slots)
        new_capacity = (
            self.capacity if capacity <= self.capacity else max(capacity, 2 * self.capacity)
        )
        shape = (new_slots, self.kv_heads, new_capacity, self.head_dim)
        grown_so_far: list[tuple[dict[int, torch.Tensor], int]] = []
        try:
            for layer in self.layers:
                for store in (self._keys, self._values):
                    grown = torch.zeros(shape, dtype=self.dtype, device=self.device)
                    if layer in store and self.slots and self.capacity:
                        grown[: self.slots, :, : self.capacity] = store[layer]
                    store[layer] = grown
                    grown_so_far.append((store, layer))
        except BaseException:
            # Out of memory after some layers grew: those keep their old shape (a view of the
            # grown buffer holding the old contents), so the requests in flight decode on.
            for store, layer in grown_so_far:
                if self.slots and self.capacity:
                    store[layer] = store[layer][: self.slots, :, : self.capacity]
                else:
                    del store[layer]
            raise
        self.slots, self.capacity = new_slots, new_capacity

    def bind(self, rows: slice, write_positions: torch.Tensor, key_len: int) -> None:
        """The next forward's rows (slots), where each row's T new tokens go (B, T), keys read."""
        self._rows, self._write, self._key_len = rows, write_positions, key_len

    def extend(
        self, layer: int, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Write ``layer``'s new keys/values (B, heads, T, hd) at the bound positions."""
        assert self._write is not None
        start = self._rows.start
        slots = torch.arange(start, start + k.shape[0], device=k.device)[:, None]
        keys, values = self._keys[layer], self._values[layer]
        # Advanced indices (slot, position) around a sliced head dim: (B, T, heads, hd).
        keys[slots, :, self._write] = k.transpose(1, 2)
        values[slots, :, self._write] = v.transpose(1, 2)
        return (
            keys[self._rows, :, : self._key_len],
            values[self._rows, :, : self._key_len],
        )

    def advance(self, positions: int) -> None:
        """Nothing to count: the server tracks each request's length."""

    def move(self, source: int, target: int, length: int) -> None:
        """Copy slot ``source``'s first ``length`` positions into slot ``target``."""
        for store in (self._keys, self._values):
            for layer in self.layers:
                store[layer][target, :, :length] = store[layer][source, :, :length]


@attrs.define(kw_only=True)
class _Active:
    """One request in flight: its slot's state and what it produced so far."""

    request: GenerationRequest
    future: asyncio.Future
    stops: frozenset[int]
    generator: torch.Generator
    length: int = 0  # positions of this request in the cache
    tokens: list[int] = attrs.Factory(list)
    logprobs: list[float] = attrs.Factory(list)
    prompt_logprobs: list[float] | None = None
    finish_reason: str | None = None


@attrs.define(kw_only=True)
class ServerStats:
    """What the server did: decode steps, wall seconds inside steps, tokens, requests."""

    steps: int = 0
    busy_s: float = 0.0
    tokens: int = 0
    requests: int = 0
    peak_batch: int = 0


class RequestServer:
    """Continuous batching of :class:`GenerationRequest` s over one :class:`TPDecoder`.

    ``decoder`` decodes at tensor-parallel size 1 (one rank serves its own
    requests; a tensor-parallel replica would need its ranks to step in
    lockstep). ``eos_ids`` end every request; ``max_batch`` caps the requests
    decoded together (more wait for a free slot); ``max_positions`` (the model's
    ``max_position_embeddings``; ``None``: no limit) refuses a request whose prompt
    plus ``max_new_tokens`` is longer. Await :meth:`generate` from any coroutine of
    one event loop at a time (another loop may take over once the first one's
    requests are done); :meth:`close` fails what is still waiting.
    """

    def __init__(
        self,
        decoder: TPDecoder,
        *,
        eos_ids: Iterable[int],
        device: torch.device,
        max_batch: int = 64,
        max_positions: int | None = None,
    ) -> None:
        if decoder.tg != 1 or not (decoder.stages.first and decoder.stages.last):
            raise HfsdkError(
                f"request-level generation decodes on one rank (tg = 1, one stage); this "
                f"decoder has tg = {decoder.tg}, {decoder.stages.count} stages"
            )
        if max_batch < 1:
            raise HfsdkError(f"max_batch={max_batch}; expected at least 1")
        self.decoder, self.device, self.max_batch = decoder, torch.device(device), max_batch
        self.max_positions = max_positions
        self.eos_ids = frozenset(int(e) for e in eos_ids)
        shape = decoder.shape
        self.cache = SlotCache(
            layers=decoder.layers, kv_heads=shape.num_kv_heads, head_dim=shape.head_dim,
            dtype=decoder.dtype, device=self.device,
        )  # fmt: skip
        self.stats = ServerStats()
        self._pending: list[_Active] = []
        self._active: list[_Active] = []  # index = slot
        self._task: asyncio.Task | None = None
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="hfsdk-requests"
        )
        self._closed = False
        # generate() may be called from several threads' loops: one check-and-queue at a time.
        self._lock = threading.Lock()

    # -- the public side ------------------------------------------------------------------
    async def generate(self, request: GenerationRequest) -> GenerationResult:
        """The request's tokens, log-probs and finish reason once it stops."""
        if self._closed:
            raise HfsdkError("the request server is closed (the rollout's weights changed or it "
                             "was closed); send requests inside rollout.serving()")  # fmt: skip
        self.decoder.check_prompt_ids(request.prompt_ids)  # here, not in a step: fails it alone
        self._check_fits(request)
        loop = asyncio.get_running_loop()
        seed = request.seed
        if seed is None:
            seed = int(torch.randint(0, 2**62, (1,)).item())
        generator = torch.Generator(device=self.device)
        generator.manual_seed(seed)
        entry = _Active(
            request=request,
            future=loop.create_future(),
            stops=self.eos_ids | frozenset(request.stop_token_ids),
            generator=generator,
        )
        with self._lock:
            task = self._task
            other = None if task is None or task.done() else task.get_loop()
            if other is not None and other is not loop and not other.is_closed():
                # A second step loop would share the queues, and either loop's end would
                # cancel into the other's requests. (A loop closed under its step loop
                # serves nothing more: a new one takes over.)
                raise HfsdkError(
                    "the request server is serving requests of another event loop (thread) "
                    "and serves one event loop at a time; send every request from one loop, "
                    "or wait until the other loop's requests are done"
                )
            self._pending.append(entry)
            self.stats.requests += 1
            if other is None or other is not loop:
                self._task = loop.create_task(self._run())
        return await entry.future

    def _check_fits(self, request: GenerationRequest) -> None:
        """Refuse a request longer than the model's positions here, for it alone: in a step
        its cache reservation (possibly absurd) would fail every request in flight."""
        limit = self.max_positions
        prompt, new = len(request.prompt_ids), request.max_new_tokens
        if limit is not None and prompt + new > limit:
            raise HfsdkError(
                f"the request needs {prompt} prompt tokens + {new} new tokens = {prompt + new} "
                f"positions but the model holds at most {limit} (its max_position_embeddings); "
                "shorten the prompt or lower the request's max_new_tokens"
            )

    def close(self) -> None:
        """Fail every waiting request and stop the worker thread."""
        self._closed = True
        error = HfsdkError("the request server closed while this request was in flight")
        for entry in self._pending + self._active:
            if not entry.future.done():
                entry.future.get_loop().call_soon_threadsafe(_fail, entry.future, error)
        self._pending, self._active = [], []
        self._executor.shutdown(wait=False)

    # -- the step loop ----------------------------------------------------------------------
    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while (self._pending or self._active) and not self._closed:
            self._drop_cancelled()
            room = self.max_batch - len(self._active)
            joiners, self._pending = self._pending[:room], self._pending[room:]
            try:
                finished, refused = await loop.run_in_executor(self._executor, self._step, joiners)
            except BaseException as error:  # every waiter must hear of it
                for entry in self._pending + self._active + joiners:
                    _fail(entry.future, error)
                self._pending, self._active = [], []
                if not isinstance(error, Exception):
                    raise
                return
            if refused is not None:  # the joiners' prefill failed; the others decode on
                for entry in joiners:
                    _fail(entry.future, refused)
            for entry in finished:
                if not entry.future.done():
                    entry.future.set_result(
                        GenerationResult(
                            token_ids=entry.tokens,
                            logprobs=entry.logprobs,
                            finish_reason=entry.finish_reason or "length",
                            prompt_logprobs=entry.prompt_logprobs,
                        )
                    )

    def _drop_cancelled(self) -> None:
        self._pending = [e for e in self._pending if not e.future.done()]
        gone = [slot for slot, e in enumerate(self._active) if e.future.done()]
        self._leave(gone)

    def _step(self, joiners: list[_Active]) -> tuple[list[_Active], Exception | None]:
        """One decode step for the active requests, then the joiners' prefill (worker thread):
        the requests that finished, and the error of a failed prefill (its joiners fail)."""
        started = time.perf_counter()
        refused = None
        with torch.no_grad():
            if self._active:
                self._decode()
            if joiners:
                first = len(self._active)
                try:
                    self._prefill(joiners)
                except Exception as error:
                    # Only the joiners' slots (past the active ones) were written: drop them.
                    del self._active[first:]
                    refused = error
        batch = len(self._active)
        finished = [slot for slot, e in enumerate(self._active) if e.finish_reason is not None]
        done = [self._active[slot] for slot in finished]
        self._leave(finished)
        self.stats.steps += 1
        self.stats.peak_batch = max(self.stats.peak_batch, batch)
        self.stats.busy_s += time.perf_counter() - started
        return done, refused

    def _prefill(self, joiners: list[_Active]) -> None:
        """Run the joiners' prompts (right-padded, together) and pick their first tokens."""
        first = len(self._active)
        lengths = [len(e.request.prompt_ids) for e in joiners]
        width = max(lengths)
        need = max(n + e.request.max_new_tokens for n, e in zip(lengths, joiners, strict=True))
        self.cache.reserve(first + len(joiners), max(need, self._longest_need()))
        dev = self.device
        ids = torch.zeros((len(joiners), width), dtype=torch.long, device=dev)
        for row, entry in enumerate(joiners):
            ids[row, : lengths[row]] = torch.tensor(entry.request.prompt_ids, device=dev)
        valid = torch.arange(width, device=dev)[None] < torch.tensor(lengths, device=dev)[:, None]
        causal = torch.ones(width, width, dtype=torch.bool, device=dev).tril()
        mask = causal[None, None] & valid[:, None, None, :]
        mask = mask | torch.eye(width, dtype=torch.bool, device=dev)[None, None]
        positions = torch.arange(width, device=dev)[None].expand(len(joiners), width)
        rows = slice(first, first + len(joiners))
        self.cache.bind(rows, positions, width)
        logits = self.decoder.forward(ids, positions, mask, self.cache)
        assert logits is not None
        for row, entry in enumerate(joiners):
            if entry.request.prompt_logprobs:  # teacher-forced over the prompt, temperature 1
                n = lengths[row]
                logp = logits[row, : n - 1].float().log_softmax(-1)
                entry.prompt_logprobs = logp.gather(1, ids[row, 1:n, None])[:, 0].tolist()
        last = torch.tensor(lengths, device=dev) - 1
        logits = logits[torch.arange(len(joiners), device=dev), last]
        for entry, n in zip(joiners, lengths, strict=True):
            entry.length = n
        self._active.extend(joiners)
        self._take(joiners, logits)

    def _decode(self) -> None:
        """Feed every active request its last token and pick the next one."""
        active = self._active
        dev = self.device
        ids = torch.tensor([[e.tokens[-1]] for e in active], dtype=torch.long, device=dev)
        positions = torch.tensor([[e.length] for e in active], dtype=torch.long, device=dev)
        key_len = max(e.length for e in active) + 1
        mask = (torch.arange(key_len, device=dev)[None] <= positions)[:, None, None, :]
        self.cache.bind(slice(0, len(active)), positions, key_len)
        logits = self.decoder.forward(ids, positions, mask, self.cache)
        assert logits is not None
        for entry in active:
            entry.length += 1
        self._take(active, logits[:, -1])

    def _take(self, entries: list[_Active], logits: torch.Tensor) -> None:
        """Each entry's next token from its row of ``logits`` (B, V), with its log-prob: picked
        on the logits' device, and read back to the host once for all the rows."""
        logits = logits.float()
        picked = []
        for row, entry in enumerate(entries):
            request = entry.request
            scaled = logits[row : row + 1] / request.logprob_temperature
            if request.is_greedy:
                token = scaled.argmax(-1).reshape(1)
            else:
                kept = nucleus_filter(top_k_filter(scaled, request.top_k), request.top_p)
                token = sample_rows(kept.softmax(-1), entry.generator).reshape(1)
            logprob = scaled.log_softmax(-1)[0].gather(0, token)
            picked.append(torch.stack([token.double(), logprob.double()], dim=1))
        rows = torch.cat(picked).tolist()  # one host sync per step, not two per row
        for entry, (token_value, logprob_value) in zip(entries, rows, strict=True):
            request = entry.request
            token = int(token_value)
            entry.tokens.append(token)
            entry.logprobs.append(logprob_value)
            self.stats.tokens += 1
            if token in entry.stops:
                entry.finish_reason = "stop"
            elif len(entry.tokens) >= request.max_new_tokens:
                entry.finish_reason = "length"

    def _leave(self, slots: list[int]) -> None:
        """Free ``slots``: the last active request moves into each freed slot."""
        for slot in sorted(slots, reverse=True):
            last = len(self._active) - 1
            if slot != last:
                moved = self._active[last]
                self.cache.move(last, slot, moved.length)
                self._active[slot] = moved
            self._active.pop()

    def _longest_need(self) -> int:
        return max(
            (len(e.request.prompt_ids) + e.request.max_new_tokens for e in self._active),
            default=0,
        )


def _fail(future: asyncio.Future, error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)
