"""How the agent runner has one step's requests served by a rollout.

The request types are the rollout contract's (:class:`GenerationRequest` /
:class:`GenerationResult`, re-exported here). A rollout that batches requests
itself (``serves_requests``: continuous batching; ``docs/agents.md`` lists the
shipped ones) gets each turn as soon as its trajectory is ready, inside
``rollout.serving()``. Any other rollout — and every run with
``rollout.multi_turn.serving=turn`` — is served by :class:`BatchingServer`,
turn by turn through ``generate_sequences``.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import math
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any

from hfsdk import GenerationRequest, GenerationResult, HfsdkError
from hfsdk_agents.images import IMAGES, ImageRequest

if TYPE_CHECKING:
    from hfsdk import RolloutBackend

__all__ = [
    "BatchingServer",
    "Generate",
    "GenerationRequest",
    "GenerationResult",
    "RequestServer",
    "cut_at_stop",
    "one_waiter",
    "request_server",
]


Generate = Callable[[GenerationRequest], Awaitable[GenerationResult]]
"""How an agent loop asks for one turn."""

_WAITER: contextvars.ContextVar[object | None] = contextvars.ContextVar(
    "hfsdk_agents_waiter", default=None
)


@contextlib.contextmanager
def one_waiter() -> Iterator[None]:
    """Requests made inside (and in tasks started inside) are one trajectory's, e.g. its
    ``n`` choices: :class:`BatchingServer` counts them as one waiting trajectory."""
    token = _WAITER.set(object())
    try:
        yield
    finally:
        _WAITER.reset(token)


def cut_at_stop(
    ids: list[int], logprobs: list[float], stops: set[int], max_new_tokens: int
) -> GenerationResult:
    """``ids`` up to and including the first stop id, at most ``max_new_tokens`` long."""
    for position, token in enumerate(ids[:max_new_tokens]):
        if token in stops:
            end = position + 1
            return GenerationResult(
                token_ids=tuple(ids[:end]), logprobs=tuple(logprobs[:end]), finish_reason="stop"
            )
    end = min(len(ids), max_new_tokens)
    return GenerationResult(
        token_ids=tuple(ids[:end]), logprobs=tuple(logprobs[:end]), finish_reason="length"
    )


class RequestServer:
    """Serves one rollout call's requests; told when each trajectory starts and ends.

    ``serving``: what holds the rollout's weights while the step's requests run (a
    request-serving rollout's ``serving``; by default nothing).
    """

    applies_sampling = True
    """Whether a request's ``temperature`` and ``top_p`` are what it is sampled with."""

    def __init__(
        self,
        generate: Generate,
        serving: Callable[[], contextlib.AbstractContextManager[None]] = contextlib.nullcontext,
    ) -> None:
        self._generate = generate
        self._serving = serving

    def serving(self) -> contextlib.AbstractContextManager[None]:
        """Entered around all of one step's trajectories (on every rank of the actor)."""
        return self._serving()

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        """The result of ``request`` (one with images is refused: the turn batcher serves those)."""
        if isinstance(request, ImageRequest) and request.images:
            raise HfsdkError(
                "a turn with images reached a rollout's generate_request, which takes token ids "
                "only; serve image turns through generate_sequences "
                "(rollout.multi_turn.serving=turn)"
            )
        return await self._generate(request)

    def trajectory_started(self) -> None:
        """A trajectory began (it will send requests until :meth:`trajectory_finished`)."""

    def trajectory_finished(self) -> None:
        """A trajectory ended (it sends no more requests)."""


class BatchingServer(RequestServer):
    """Serves :class:`GenerationRequest` s with a rollout's ``generate_sequences``, turn by turn.

    A batch closes when every live trajectory is waiting for its next turn, so its
    rows do not depend on how fast each tool returned: the same requests make the
    same batches on every run and on every rank of a collective rollout (a
    tensor-parallel actor's ranks decode together). A slow tool holds up the turn;
    a rollout that implements ``generate_request`` serves requests one by one
    instead. The rollout's own sampling settings apply (its temperature, top-p,
    ``max_response_length``); its output is cut at each request's stop ids and
    ``max_new_tokens``, and tokens past the cut are dropped, never trained on.
    ``eos_ids`` always stop. Turns with images (:class:`ImageRequest`) bring them as the
    non-tensor column :data:`hfsdk_agents.images.IMAGES` (an empty list on other rows).
    """

    applies_sampling = False  # generate_sequences samples with the rollout's own settings

    def __init__(self, rollout: RolloutBackend, *, pad_id: int, eos_ids: tuple[int, ...]) -> None:
        self.rollout = rollout
        self.pad_id = pad_id
        self.eos_ids = tuple(eos_ids)
        self.calls = 0
        self._live = 0
        self._busy = False
        # (request, its future, its waiter: the trajectory it stands for)
        self._waiting: list[tuple[GenerationRequest, asyncio.Future[GenerationResult], object]] = []
        self._tasks: set[asyncio.Task[None]] = set()

    def serving(self) -> contextlib.AbstractContextManager[None]:
        """Nothing to hold: each turn's ``generate_sequences`` call handles the weights."""
        return contextlib.nullcontext()

    def trajectory_started(self) -> None:
        """One more trajectory takes part in the turns."""
        self._live += 1

    def trajectory_finished(self) -> None:
        """A trajectory left: the others may no longer wait for it."""
        self._live -= 1
        self._poke()

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        """The result of ``request`` (batched with every other live trajectory's)."""
        future: asyncio.Future[GenerationResult] = asyncio.get_running_loop().create_future()
        waiter = _WAITER.get()
        self._waiting.append((request, future, future if waiter is None else waiter))
        self._poke()
        return await future

    def _poke(self) -> None:
        # Trajectories, not requests: one asking for n choices must not close the turn
        # before the other live trajectories are waiting.
        waiters = len({id(waiter) for _, _, waiter in self._waiting})
        if self._busy or not self._waiting or waiters < self._live:
            return
        self._busy = True
        task = asyncio.get_running_loop().create_task(self._serve())
        self._tasks.add(task)  # keep a reference until it is done
        task.add_done_callback(self._tasks.discard)

    async def _serve(self) -> None:
        waiting, self._waiting = self._waiting, []
        groups: dict[bool, list[tuple[GenerationRequest, asyncio.Future[Any]]]] = {}
        for request, future, _ in waiting:
            groups.setdefault(request.greedy, []).append((request, future))
        try:
            for greedy, group in groups.items():
                try:
                    results = await asyncio.to_thread(self._run, [r for r, _ in group], greedy)
                except Exception as err:
                    for _, future in group:
                        if not future.done():
                            future.set_exception(err)
                    continue
                for (_, future), result in zip(group, results, strict=True):
                    if not future.done():
                        future.set_result(result)
        finally:
            self._busy = False
        self._poke()

    def _run(self, requests: list[GenerationRequest], greedy: bool) -> list[GenerationResult]:
        import torch

        from hfsdk import Batch

        width = max(len(r.prompt_ids) for r in requests)
        ids = torch.full((len(requests), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(requests), width), dtype=torch.long)
        for row, request in enumerate(requests):
            if not request.prompt_ids:
                raise HfsdkError("a generation request has no prompt tokens; give it a context")
            ids[row, width - len(request.prompt_ids) :] = torch.tensor(request.prompt_ids)
            mask[row, width - len(request.prompt_ids) :] = 1
        images = [list(r.images) if isinstance(r, ImageRequest) else [] for r in requests]
        batch = Batch.from_dict(
            tensors={"input_ids": ids, "attention_mask": mask},
            non_tensors={IMAGES: images} if any(images) else None,
            meta={"greedy": greedy, "n": 1},
        )
        self.calls += 1
        out = self.rollout.generate_sequences(batch)
        responses, valid = out["responses"], out["response_mask"].bool()
        has_lp = "rollout_log_probs" in out.tensor_keys
        logprobs = out["rollout_log_probs"] if has_lp else None
        results = []
        for row, request in enumerate(requests):
            produced = responses[row][valid[row]].tolist()
            row_lp = logprobs[row][valid[row]].tolist() if logprobs is not None else []
            row_lp = row_lp or [math.nan] * len(produced)
            stops = {*self.eos_ids, *request.stop_token_ids}
            results.append(cut_at_stop(produced, row_lp, stops, request.max_new_tokens))
        return results


def request_server(
    rollout: RolloutBackend, *, pad_id: int, eos_ids: tuple[int, ...], serving: str = "request"
) -> RequestServer:
    """The one place the agent runner gets its requests served from a rollout (per call).

    ``serving="request"`` and a rollout that ``serves_requests``: the rollout serves
    each request itself, many in flight (the caller holds ``rollout.serving()``).
    Otherwise a :class:`BatchingServer` batches the turns through ``generate_sequences``
    (the contract's one-row default would cost a call per request; a collective rollout
    without request serving needs every rank to decode the same rows together).
    """
    if serving == "request" and rollout.serves_requests:
        return RequestServer(rollout.generate_request, rollout.serving)
    return BatchingServer(rollout, pad_id=pad_id, eos_ids=eos_ids)
