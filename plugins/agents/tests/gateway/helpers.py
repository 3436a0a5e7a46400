"""A request-serving scripted rollout for gateway tests (no model), recording every result."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from hfsdk import GenerationRequest, GenerationResult
from hfsdk_agents.requests import cut_at_stop

from ..fakes import ScriptedRollout, rollout_for

SeededScript = Callable[[list[int], int], list[int]]
"""(context ids, request seed) -> the ids the fake engine produces before its stops."""


class RequestRollout(ScriptedRollout):
    """Serves each request itself with ``seeded``; the seed it passes is the request's seed
    minus the first request's (a trajectory's draws count 0, 1, ...). Log-prob of token i is
    ``-(seed % 7 + 1)/10 - i/100``, so captured log-probs can be told apart. ``requests``
    and ``results`` record what it was asked and what it returned."""

    serves_requests = True

    def __init__(self, *args: Any, seeded: SeededScript, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seeded = seeded
        self.requests: list[GenerationRequest] = []
        self.results: list[GenerationResult] = []
        self._lock = threading.Lock()
        self._first_seed: int | None = None

    async def generate_request(self, request: GenerationRequest) -> GenerationResult:
        await asyncio.sleep(0)
        if self._first_seed is None:
            self._first_seed = request.seed or 0
        seed = (request.seed or 0) - self._first_seed
        ids = self.seeded(list(request.prompt_ids), seed)
        lps = [-((seed % 7) + 1) / 10 - i / 100 for i in range(len(ids))]
        stops = {*request.stop_token_ids}
        result = cut_at_stop(ids, lps, stops, request.max_new_tokens)
        with self._lock:
            self.requests.append(request)
            self.results.append(result)
        return result


def request_rollout(tokenizer: Any, seeded: SeededScript, **multi_turn: Any) -> RequestRollout:
    """A :class:`RequestRollout` whose ``rollout.multi_turn`` has ``multi_turn``."""
    base = rollout_for(tokenizer, lambda c: [], **multi_turn)
    return RequestRollout(base.config, base.actor, lambda c: [], seeded=seeded)
