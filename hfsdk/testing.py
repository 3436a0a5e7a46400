"""Run an algorithm's ``step()`` in milliseconds against fake roles that record their calls.

For plugin authors' unit tests (and this repository's): no Ray, no model. Each
fake role answers the worker operations of its kind with small deterministic
tensors and records every call (role, method, batch keys, greedy or not), so a
test can check the program's order of calls, the keys it hands over and the
metrics it records. The maths (estimators, KL) are the real registered ones.

    from hfsdk.testing import FakeRun

    run = FakeRun.for_algorithm("grpo", rewards=[1.0, 0.0, 1.0, 0.0])
    metrics = run.step()
    assert run.calls_of("actor")[0].method == "generate_sequences"
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import torch

from hfsdk.core.algorithm import AlgorithmContext
from hfsdk.core.batch import Batch

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


OPERATIONS = (
    "generate_sequences",
    "compute_log_prob",
    "compute_ref_log_prob",
    "compute_values",
    "compute_scores",
    "update_actor",
    "update_critic",
    "update_score_model",
)
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
    (:data:`~hfsdk.core.algorithm_spec.KIND_OPERATIONS`): a program that calls
    ``critic.generate_sequences`` fails here as it would on a real run.
    Operations can also be ``submit``-ted like a worker group's; ``timeline``
    records when each was dispatched and when its result was taken, so a test
    can tell which calls overlapped.
    """

    def __init__(
        self, name: str, log: list[Call], seed: int, timeline: list | None = None, *, kind: str
    ) -> None:
        from hfsdk.core.algorithm_spec import KIND_OPERATIONS

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

    Its metric ``fn_mean`` is the mean score it gave, so a test can tell whose
    metrics ended up in the step's metrics.
    """

    def __init__(
        self, name: str, log: list[Call], sampled: Sequence[float], greedy: float = 0.0
    ) -> None:
        self.name, self.log, self.sampled, self.greedy = name, log, list(sampled), greedy

    def __call__(self, batch: Batch) -> tuple[torch.Tensor, dict[str, float]]:
        is_greedy = bool(len(batch)) and batch["response_text"][0] == "greedy"
        self.log.append(Call(self.name, "score", _keys(batch), is_greedy))
        if is_greedy:
            scores = torch.full((len(batch),), float(self.greedy))
        else:
            scores = torch.tensor([self.sampled[i % len(self.sampled)] for i in range(len(batch))])
        return scores, {"fn_mean": float(scores.mean())}


def fake_prompts(n: int, meta: dict[str, Any] | None = None) -> Batch:
    """``n`` prompts of width :data:`PROMPT_WIDTH` with ``uid`` and ``raw_prompt`` columns."""
    ids = torch.arange(n * PROMPT_WIDTH).reshape(n, PROMPT_WIDTH) + 3
    return Batch.from_dict(
        tensors={"input_ids": ids, "attention_mask": torch.ones_like(ids)},
        non_tensors={"uid": list(range(n)), "raw_prompt": [f"p{i}" for i in range(n)]},
        meta=dict(meta or {}),
    )


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

        Every ``scorer`` role gets a :class:`FakeSignal` (``rewards`` for sampled
        responses, ``greedy_reward`` for greedy ones) unless ``signals`` maps it
        to a factory of another one.
        """
        from hfsdk.core.config import load_run_config
        from hfsdk.core.run_spec import run_spec

        config = load_run_config(algo, None, list(overrides))
        spec = run_spec(config)
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
        context = AlgorithmContext(config=config, roles=roles, signals=made, spec=spec)
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


def save_tiny_llama(
    directory: Path,
    tokenizer: Any,
    *,
    hidden_size: int,
    intermediate_size: int,
    num_heads: int,
    num_kv_heads: int,
    num_layers: int = 2,
    extra_vocab: int = 0,
    tied: bool = False,
    init_std: float | None = None,
    seed: int = 0,
) -> Path:
    """Save a randomly initialised HF Llama and ``tokenizer`` to ``directory``; return it.

    ``extra_vocab`` rows beyond the tokenizer's make an odd vocabulary (which
    tensor-parallel engines pad); ``init_std`` redraws every matrix from
    N(0, init_std²), which peaks the logits so greedy decoding has no near-ties.
    """
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer) + extra_vocab,
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        max_position_embeddings=64,
        tie_word_embeddings=tied,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    if init_std is not None:
        with torch.no_grad():
            for param in model.parameters():
                if param.dim() == 2:
                    param.normal_(0.0, init_std)
    model.save_pretrained(str(directory))
    tokenizer.save_pretrained(str(directory))
    return directory


def hf_greedy_responses(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    *,
    width: int,
    eos: int,
    pad: int,
) -> torch.Tensor:
    """HF greedy ``generate``'s responses as a rollout returns them: ``width`` columns,
    padding after each row's first EOS (the reference for rollout-engine tests)."""
    with torch.no_grad():
        out = model.generate(
            input_ids=input_ids,
            attention_mask=attention_mask,
            max_new_tokens=width,
            do_sample=False,
            eos_token_id=eos,
            pad_token_id=pad,
        )[:, input_ids.shape[1] :]
    padded = torch.full((len(out), width), pad, dtype=torch.long)
    padded[:, : out.shape[1]] = out
    for row in padded:
        hits = (row == eos).nonzero()
        if len(hits):
            row[hits[0, 0] + 1 :] = pad
    return padded


def hf_sequence_scores(model_dir: Any, batch: Batch) -> torch.Tensor:
    """Each row's score by transformers alone (``AutoModelForSequenceClassification`` from
    ``model_dir``): its head at the row's last response token, one row at a time, with no
    padding — the reference for score-model (reward, cost) tests. ``batch`` has
    ``prompts`` (left-padded), ``responses``, ``attention_mask`` and ``response_mask``."""
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(str(model_dir)).eval()
    prompt_width = batch["prompts"].shape[1]
    scores = []
    for row in range(len(batch)):
        prompt = batch["prompts"][row][batch["attention_mask"][row, :prompt_width] == 1]
        length = int(batch["response_mask"][row].sum())
        ids = torch.cat([prompt, batch["responses"][row, :length]])[None]
        with torch.no_grad():
            logits = model(input_ids=ids).logits
        scores.append(float(logits[0, 0]) if logits.dim() == 2 else float(logits[0, -1, 0]))
    return torch.tensor(scores)


# Wall-clock measurements, and what is derived from them, differ between any two runs.
TIMED_METRIC_PREFIXES = (
    "timing/", "perf/", "sync/send_s", "sync/receive_s", "sync/rollout_wait_s", "plan/",
)  # fmt: skip


def untimed_metrics(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` without the wall-clock metrics (:data:`TIMED_METRIC_PREFIXES`)."""
    return {k: v for k, v in row.items() if not k.startswith(TIMED_METRIC_PREFIXES)}


def assert_runs_identical(
    run_a: Path, rows_a: Sequence[dict], run_b: Path, rows_b: Sequence[dict], step: int
) -> None:
    """Two runs of one config are bitwise identical: every untimed metric of every step
    (``==``; NaN only where the other is NaN) and the actor's HF weights at ``step``; and
    they trained (the first and last steps' gradient norms differ)."""
    from safetensors.torch import load_file

    for row_a, row_b in zip(rows_a, rows_b, strict=True):
        untimed_a, untimed_b = untimed_metrics(row_a), untimed_metrics(row_b)
        assert untimed_a.keys() == untimed_b.keys(), row_a["step"]
        for key, value in untimed_a.items():
            other = untimed_b[key]
            assert value == other or (value != value and other != other), (row_a["step"], key)
    path = Path("checkpoints") / f"step_{step}" / "actor_hf" / "model.safetensors"
    weights_a, weights_b = load_file(str(run_a / path)), load_file(str(run_b / path))
    assert weights_a.keys() == weights_b.keys()
    for name, tensor in weights_a.items():
        assert torch.equal(tensor, weights_b[name]), name
    assert rows_a[0]["actor/grad_norm"] != rows_a[-1]["actor/grad_norm"]  # the runs trained


def alias_bomb(levels: int = 9) -> str:
    """A YAML "billion laughs" document: ``levels`` levels of nine aliases (9^9 leaves at 9),
    under ``trainer.total_steps``; every YAML reader must refuse it fast."""
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    previous = "a"
    for name in "bcdefghijk"[: levels - 1]:
        lines.append(f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]")
        previous = name
    lines.append(f"trainer:\n  total_steps: *{previous}")
    return "\n".join(lines) + "\n"


def assert_refused_in_one_line(
    args: Sequence[str], pattern: str, capsys: Any, *, root: Path, within_s: float = 60.0
) -> str:
    """Run ``hfsdk ARGS`` in-process and check the refusal contract: exit 2, one
    ``Error:`` line matching ``pattern`` (no traceback), within ``within_s``, and no
    file under ``root`` written or changed. Returns the line."""
    import re
    import time

    from hfsdk.core.cli.main import main

    def files() -> dict[str, bytes]:
        return {
            p.relative_to(root).as_posix(): p.read_bytes()
            for p in root.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts
        }

    before = files()
    started = time.perf_counter()
    try:
        main(list(args))
    except SystemExit as exc:
        code = exc.code
    else:
        code = 0
    took = time.perf_counter() - started
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, err[-2000:]
    assert len(lines) == 1, err[:2000]
    assert "Traceback" not in err + out and "internal error" not in err
    assert lines[0].startswith("Error: ") and len(lines[0]) < 600, lines[0][:2000]
    assert re.search(pattern, lines[0]), lines[0]
    assert took < within_s, f"took {took:.1f} s"  # an alias bomb used to hang for good
    assert files() == before, "a file was written or changed"
    return lines[0]
