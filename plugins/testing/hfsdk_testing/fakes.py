"""Run an algorithm's ``step()`` in milliseconds against fake roles that record their calls.

No Ray, no model. Each fake role answers the worker operations of its kind
(and only those) with small deterministic tensors and records every call (role,
method, batch keys, greedy or not), so a test can check the program's order of
calls, the keys it hands over and the metrics it records. The maths
(estimators, KL) are the real registered ones.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs
import torch

from hfsdk import KIND_OPERATIONS, AlgorithmContext, Batch, load_run_config, run_spec

PROMPT_WIDTH = 3
RESPONSE_WIDTH = 4


@attrs.frozen
class Call:
    """One recorded call: which role, which operation, which batch keys, greedy or not."""

    role: str
    method: str
    keys: tuple[str, ...]
    greedy: bool = False


def _keys(batch: Batch) -> tuple[str, ...]:
    return tuple(sorted(batch.keys()))


OPERATIONS = tuple(dict.fromkeys(op for ops in KIND_OPERATIONS.values() for op in ops))
"""Every worker operation a :class:`FakeRole` can fake (each role gets its kind's)."""


class FakeFuture:
    """A fake worker-group call's future: the operation runs when its result is asked for."""

    def __init__(self, role: str, method: str, run: Callable[[], Any], timeline: list) -> None:
        self.role, self.method, self._run, self._timeline = role, method, run, timeline
        self._done = False
        self._value: Any = None

    def result(self) -> Any:
        """Run the operation (once) and return its result; logged as ``("result", ...)``."""
        if not self._done:
            self._timeline.append(("result", self.role, self.method))
            self._value, self._done = self._run(), True
        return self._value

    def busy_s(self) -> float:
        """Fake calls take no worker time."""
        return 0.0


class FakeMethod:
    """One operation of a fake role: call it (blocking) or ``submit`` it (a :class:`FakeFuture`)."""

    def __init__(self, role: FakeRole, name: str, fn: Callable[[Batch], Any]) -> None:
        self.role, self.name, self.fn = role, name, fn

    def __call__(self, batch: Batch) -> Any:
        return self.fn(batch)

    def submit(self, batch: Batch) -> FakeFuture:
        """Dispatch without waiting; logged as ``("submit", role, method)`` in the timeline."""
        self.role.timeline.append(("submit", self.role.name, self.name))
        return FakeFuture(self.role.name, self.name, lambda: self.fn(batch), self.role.timeline)


class FakeRole:
    """The worker group of one role: the operations of its kind, recorded in ``log``.

    A role offers what a real backend's worker of its ``kind`` offers
    (:data:`hfsdk.KIND_OPERATIONS`): a program that calls
    ``critic.generate_sequences`` fails here as it would on a real run.
    Operations can also be ``submit``-ted like a worker group's; ``timeline``
    records when each was dispatched and when its result was taken, so a test
    can tell which calls overlapped.
    """

    def __init__(
        self, name: str, log: list[Call], seed: int, timeline: list | None = None, *, kind: str
    ) -> None:
        self.name = name
        self.kind = kind
        self.log = log
        self.timeline: list[tuple[str, str, str]] = [] if timeline is None else timeline
        self.gen = torch.Generator().manual_seed(seed)
        self.batches: dict[str, Batch] = {}
        """The last batch each operation was handed, by method name."""
        self.operations = KIND_OPERATIONS[kind]
        for op in self.operations:
            setattr(self, op, FakeMethod(self, op, getattr(self, op)))

    def __getattribute__(self, name: str) -> Any:
        if name in OPERATIONS and name not in object.__getattribute__(self, "operations"):
            kind = object.__getattribute__(self, "kind")
            offered = ", ".join(object.__getattribute__(self, "operations"))
            role = object.__getattribute__(self, "name")
            raise AttributeError(
                f"role {role!r} is of kind {kind!r}, whose workers offer {offered}; "
                f"no backend runs {name} for it"
            )
        return object.__getattribute__(self, name)

    def _record(self, method: str, batch: Batch) -> None:
        self.log.append(Call(self.name, method, _keys(batch), bool(batch.meta.get("greedy"))))
        self.batches[method] = batch

    def _token_values(self, batch: Batch) -> torch.Tensor:
        mask = batch["response_mask"].float()
        return torch.rand(mask.shape, generator=self.gen) * mask

    def generate_sequences(self, prompts: Batch) -> Batch:
        """Responses of 2..4 tokens; ``response_text`` says whether they were greedy."""
        self._record("generate_sequences", prompts)
        n = len(prompts)
        greedy = bool(prompts.meta.get("greedy"))
        lengths = torch.tensor([2 + (i % 3) for i in range(n)])
        mask = (torch.arange(RESPONSE_WIDTH)[None, :] < lengths[:, None]).long()
        responses = torch.randint(3, 50, (n, RESPONSE_WIDTH), generator=self.gen) * mask
        prompt_ids = prompts["input_ids"]
        attention = torch.cat([prompts["attention_mask"].long(), mask], dim=1)
        non_tensors = {k: list(prompts[k]) for k in prompts.non_tensor_keys}
        non_tensors["response_text"] = ["greedy" if greedy else "sampled"] * n
        return Batch.from_dict(
            tensors={
                "prompts": prompt_ids,
                "responses": responses,
                "input_ids": torch.cat([prompt_ids, responses], dim=1),
                "attention_mask": attention,
                "position_ids": attention.cumsum(dim=1) - 1,
                "response_mask": mask,
            },
            non_tensors=non_tensors,
            meta={**prompts.meta, "temperature": 1.0},
        )

    def compute_log_prob(self, batch: Batch) -> Batch:
        """``old_log_probs`` and ``entropys``."""
        self._record("compute_log_prob", batch)
        lp = -self._token_values(batch)
        return Batch.from_dict(tensors={"old_log_probs": lp, "entropys": -lp})

    def compute_ref_log_prob(self, batch: Batch) -> Batch:
        """``ref_log_probs``."""
        self._record("compute_ref_log_prob", batch)
        return Batch.from_dict(tensors={"ref_log_probs": -self._token_values(batch)})

    def compute_values(self, batch: Batch) -> Batch:
        """``values``."""
        self._record("compute_values", batch)
        return Batch.from_dict(tensors={"values": self._token_values(batch)})

    def compute_scores(self, batch: Batch) -> Batch:
        """``rm_scores``."""
        self._record("compute_scores", batch)
        return Batch.from_dict(tensors={"rm_scores": torch.zeros(len(batch))})

    def update_actor(self, batch: Batch) -> dict[str, float]:
        """Records the keys it was given; returns ``actor/pg_loss`` = mean advantage."""
        self._record("update_actor", batch)
        return {"actor/pg_loss": float(batch["advantages"].mean())}

    def update_critic(self, batch: Batch) -> dict[str, float]:
        """Records the keys it was given; returns ``critic/vf_loss`` = mean return."""
        self._record("update_critic", batch)
        return {"critic/vf_loss": float(batch["returns"].mean())}

    def update_score_model(self, batch: Batch) -> dict[str, float]:
        """Records the keys it was given; returns ``score_model/loss`` = 0."""
        self._record("update_score_model", batch)
        return {"score_model/loss": 0.0}


class FakeSignal:
    """A scorer: ``sampled`` scores for sampled responses, ``greedy`` for greedy ones.

    Scores are float32 (integers such as ``[1, 0]`` included) and handed out in turn, the
    cycle restarting at every call: each generation round of a step (DAPO's dynamic
    sampling) gets the same scores in the same order. A test wanting later rounds scored
    differently passes its own signal (``FakeRun.for_algorithm(signals=...)``).

    Its metric ``fn_mean`` is the mean score it gave, so a test can tell whose
    metrics ended up in the step's metrics.
    """

    def __init__(
        self, name: str, log: list[Call], sampled: Sequence[float], greedy: float = 0.0
    ) -> None:
        if not len(sampled):  # scores are handed out in turn: none would divide by zero
            from hfsdk import HfsdkError

            raise HfsdkError(
                f"FakeSignal {name!r} got sampled=[], no score to give the sampled responses; "
                "pass at least one score (they are given out in turn)"
            )
        self.name, self.log, self.sampled, self.greedy = name, log, list(sampled), greedy

    def __call__(self, batch: Batch) -> tuple[torch.Tensor, dict[str, float]]:
        is_greedy = bool(len(batch)) and batch["response_text"][0] == "greedy"
        self.log.append(Call(self.name, "score", _keys(batch), is_greedy))
        if is_greedy:
            scores = torch.full((len(batch),), float(self.greedy))
        else:  # float32 whatever was passed: integer scores would fail in a mean
            scores = torch.tensor(
                [float(self.sampled[i % len(self.sampled)]) for i in range(len(batch))],
                dtype=torch.float32,
            )
        return scores, {"fn_mean": float(scores.mean())}


def fake_prompts(n: int, meta: dict[str, Any] | None = None, *, first_uid: int = 0) -> Batch:
    """``n`` prompts of width :data:`PROMPT_WIDTH` with ``uid`` and ``raw_prompt`` columns.

    Their uids (and ``raw_prompt`` names) count up from ``first_uid``.
    """
    ids = torch.arange(n * PROMPT_WIDTH).reshape(n, PROMPT_WIDTH) + 3
    uids = list(range(first_uid, first_uid + n))
    return Batch.from_dict(
        tensors={"input_ids": ids, "attention_mask": torch.ones_like(ids)},
        non_tensors={"uid": uids, "raw_prompt": [f"p{i}" for i in uids]},
        meta=dict(meta or {}),
    )


class FakePromptSource:
    """A :class:`hfsdk.PromptSource` of :func:`fake_prompts` with fresh uids on every draw.

    Programs that draw more prompts within ``step()`` (DAPO's dynamic sampling) group
    rows by uid, so each draw's uids follow the last draw's, after the ``0..first_uid-1``
    that :meth:`FakeRun.step` gives its own prompts.
    """

    def __init__(self, batch_size: int, first_uid: int) -> None:
        self.batch_size = batch_size
        self.next_uid = first_uid
        self.drawn: list[Batch] = []
        """Every batch drawn, in order."""

    def next_batch(self, n: int | None = None) -> Batch:
        """The next ``n`` prompts (default: ``batch_size``), uids not given out before."""
        n = self.batch_size if n is None else n
        batch = fake_prompts(n, first_uid=self.next_uid)
        self.next_uid += n
        self.drawn.append(batch)
        return batch


@attrs.define
class FakeRun:
    """An algorithm instance wired to fake roles and signals, and the log of their calls."""

    algorithm: Any
    log: list[Call]
    prompts: int
    timeline: list[tuple[str, str, str]] = attrs.Factory(list)
    """``(submit | result, role, method)`` of every non-blocking call, in order."""

    @classmethod
    def for_algorithm(
        cls,
        algo: str,
        overrides: Sequence[str] = (),
        *,
        prompts: int = 2,
        signals: dict[str, Callable[[list[Call]], FakeSignal]] | None = None,
        rewards: Sequence[float] = (1.0, 0.0),
        greedy_reward: float = 0.0,
    ) -> FakeRun:
        """Build ``algo``'s program from its registered spec and the default config.

        Every ``scorer`` role gets a :class:`FakeSignal` (``rewards``, at least one, for
        sampled responses, ``greedy_reward`` for greedy ones) unless ``signals`` maps it
        to a factory of another one; a ``signals`` key that is no scorer role is refused.

        An algorithm that trains on the dataset's own rows (no policy, or its spec's
        ``trains_on_generations`` is false: SFT, DPO, reward models) is refused: its
        ``step()`` tokenizes those rows on the controller, and FakeRun has neither rows nor
        a tokenizer to give it.

        The context's prompt stream is a :class:`FakePromptSource` (``prompts`` per draw by
        default, fresh uids), so a program that draws more prompts within a step runs.
        """
        from hfsdk import HfsdkError

        config = load_run_config(algo, None, list(overrides))
        spec = run_spec(config)
        if not spec.has_policy or not spec.trains_on_generations:
            raise HfsdkError(
                f"FakeRun.for_algorithm({algo!r}): algorithm {spec.name!r} trains on the "
                "dataset's own rows, which its step() tokenizes on the controller, and FakeRun "
                "has neither those rows nor a tokenizer (its prompts are token ids only); build "
                "its AlgorithmContext with FakeRole/FakeSignal roles, the rows and "
                "tokenizer=hfsdk.load_tokenizer(...) (as plugins/sft/tests/test_sft_program.py "
                "does), or test it with a short Trainer run"
            )
        scorers = spec.roles_of_kind("scorer")
        unknown = sorted(set(signals or {}) - set(scorers))
        if unknown:  # a misspelt role would silently keep the default FakeSignal
            raise HfsdkError(
                f"FakeRun.for_algorithm({algo!r}): signals has {', '.join(map(repr, unknown))}, "
                f"no scorer role of algorithm {spec.name!r} (its scorer roles: "
                f"{', '.join(scorers) or 'none'}); key signals by one of those roles"
            )
        if not len(rewards):
            raise HfsdkError(
                f"FakeRun.for_algorithm({algo!r}): rewards=[] gives the fake scorers no score "
                "for sampled responses; pass at least one (they are given out in turn)"
            )
        log: list[Call] = []
        timeline: list[tuple[str, str, str]] = []
        roles = {
            r.name: FakeRole(r.name, log, seed=i, timeline=timeline, kind=r.kind)
            for i, r in enumerate(spec.roles)
            if r.kind != "scorer"
        }
        made = {}
        for role in spec.roles_of_kind("scorer"):
            factory = (signals or {}).get(role)
            made[role] = factory(log) if factory else FakeSignal(role, log, rewards, greedy_reward)
        # A stream to draw more prompts from within a step, past step()'s uids 0..prompts-1.
        source = FakePromptSource(prompts, first_uid=prompts)
        context = AlgorithmContext(
            config=config, roles=roles, signals=made, spec=spec, prompts=source
        )
        return cls(algorithm=spec.program(context), log=log, prompts=prompts, timeline=timeline)

    def step(self) -> dict[str, float]:
        """One ``step()`` on :func:`fake_prompts`; returns its metrics."""
        return self.algorithm.step(fake_prompts(self.prompts))

    def role(self, name: str) -> FakeRole:
        """The fake worker group of role ``name``."""
        return self.algorithm.context.roles[name]

    def calls_of(self, role: str) -> list[Call]:
        """The recorded calls of ``role``, in order."""
        return [c for c in self.log if c.role == role]

    @property
    def order(self) -> list[tuple[str, str]]:
        """``(role, method)`` of every call, in order."""
        return [(c.role, c.method) for c in self.log]
