"""Programs draw more prompts within a step; the checkpoint's data position covers them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import torch

import hfsdk
from hfsdk.core import plugin_manager
from hfsdk.core.algorithm import AlgorithmContext
from hfsdk.core.batch import Batch
from hfsdk.core.config import load_run_config
from hfsdk.core.errors import HfsdkError
from hfsdk.core.trainer.trainer import Trainer

EXTRA = 4  # what the docs' example draws within a step
SMALL = [
    "data.batch_size=4",
    "algorithm.n_samples_per_prompt=2",
    "actor.mini_batch_size=4",
    "actor.micro_batch_size=8",
    "trainer.executor=local",
]
COMPARED = ("reward/mean", "actor/pg_loss", "actor/grad_norm", "data/extra_prompt_ids")
DOCS = Path(__file__).resolve().parents[3] / "docs" / "algorithms.md"


def _docs_example() -> dict[str, Any]:
    """The namespace of docs/algorithms.md's "Drawing more prompts" example, run as written
    (``left_pad``, ``Refill``, ``SPEC``), with the names it takes from its context."""
    text = DOCS.read_text()
    fence = "```python\n"
    start = text.index(fence, text.index("**Drawing more prompts.**")) + len(fence)
    grpo = hfsdk.get_registry("algorithms")["grpo"].impl
    namespace: dict[str, Any] = {
        "GRPOAlgorithm": grpo.program,
        "GRPO_SPEC": grpo,
        "Batch": Batch,
        "attrs": attrs,
    }
    exec(text[start : text.index("```", start)], namespace)  # the docs' own code, as written
    return namespace


def _draw_more_spec() -> hfsdk.AlgorithmSpec:
    """The docs' ``Refill`` (GRPO drawing ``EXTRA`` more prompts a step), reporting which."""
    example = _docs_example()

    class DrawMore(example["Refill"]):  # type: ignore[misc, name-defined]
        """The docs' example, plus metrics of the prompts it drew."""

        def step(self, prompts: Batch) -> dict[str, float]:
            metrics = super().step(prompts)
            # The drawn prompts are the trained batch's last rows (n samples each): a resume
            # from another data position would differ.
            rows = EXTRA * self.algo_config.n_samples_per_prompt
            trained = self.last_batch
            width = trained["prompts"].shape[1]
            ids = trained["prompts"][-rows:] * (trained["attention_mask"][-rows:, :width] > 0)
            weights = torch.arange(1, ids.numel() + 1).view_as(ids)
            metrics["data/extra_prompt_ids"] = float((ids * weights).sum())
            metrics["data/prompts"] = float(len(trained) // self.algo_config.n_samples_per_prompt)
            return metrics

    return attrs.evolve(example["SPEC"], name="draw_more", program=DrawMore)


def _uneven_prompts(path: Path) -> list[str]:
    """Overrides for a run on the default task's model whose prompts come in fours of 5
    and 7 tokens (unshuffled): each step's batch and its extra draw differ in width."""
    import json

    from hfsdk import default_task_assets

    rows = []
    for i in range(48):
        a, b, c = i % 10, (3 * i + 1) % 10, (7 * i + 2) % 10
        short = (i // 4) % 2 == 0
        prompt = f"{a} + {b} =" if short else f"{a} + {b} + {c} ="
        rows.append({"prompt": prompt, "answer": str(a + b if short else a + b + c)})
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    model = default_task_assets().model_dir
    return [
        f"data.train_files=[{path}]",
        "data.shuffle=false",
        "reward.functions=[{name: default_task}]",
        f"actor.model_path={model}",
        f"reference.model_path={model}",
    ]


class _DrawMorePlugin:
    @staticmethod
    @hfsdk.hookimpl
    def hfsdk_register_algorithms(register):  # type: ignore[no-untyped-def]
        spec = _draw_more_spec()
        register(spec.name, spec)


@pytest.fixture
def with_draw_more(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process-wide plugin manager with the ``draw_more`` algorithm added."""
    real = plugin_manager.build_plugin_manager

    def build(extra: Any = (), **kwargs: Any) -> Any:
        return real([*extra, ("draw_more", _DrawMorePlugin)], **kwargs)

    plugin_manager.reset_plugin_manager()
    monkeypatch.setattr(plugin_manager, "build_plugin_manager", build)
    yield
    monkeypatch.undo()
    plugin_manager.reset_plugin_manager()


@pytest.mark.slow
@pytest.mark.usefixtures("with_draw_more")
def test_prompts_drawn_within_a_step_resume_exactly(tmp_path: Path) -> None:
    data = _uneven_prompts(tmp_path / "train.jsonl")

    def fit(run: str, steps: int) -> list[dict]:
        overrides = [*SMALL, *data, f"trainer.total_steps={steps}"]
        config = load_run_config("draw_more", None, overrides)
        return Trainer(config, tmp_path / run, quiet=True).fit()

    straight = fit("straight", 4)
    fit("resumed", 2)
    resumed = fit("resumed", 4)
    assert [r["step"] for r in resumed] == [1, 2, 3, 4]
    assert all(r["data/prompts"] == 4 + EXTRA and "timing/dynamic_sampling_s" in r for r in resumed)
    # Each step drew prompts of its own (the stream moved on), and the resumed run drew
    # the same ones as the straight run: the checkpointed position includes the draws.
    assert len({r["data/extra_prompt_ids"] for r in straight}) > 1
    for a, b in zip(straight, resumed, strict=True):
        for key in COMPARED:
            assert a[key] == pytest.approx(b[key], rel=1e-5, abs=1e-7), (a["step"], key)


def test_the_docs_example_joins_draws_of_different_widths(tmp_path: Path) -> None:
    """Before: the example's ``Batch.concat([prompts, more])`` failed on any two draws whose
    widest prompts differ ("shapes [(4, 5), (4, 7)] differ beyond the first dimension")."""
    from hfsdk.core.trainer.preflight import prepare_run

    spec = hfsdk.get_registry("algorithms")["grpo"].impl
    config = load_run_config("grpo", None, [*SMALL, *_uneven_prompts(tmp_path / "t.jsonl")])
    loader = prepare_run(config, spec).loader
    prompts, more = loader.next_batch(), loader.next_batch(EXTRA)
    assert prompts["input_ids"].shape[1] != more["input_ids"].shape[1]
    left_pad = _docs_example()["left_pad"]
    width = max(prompts["input_ids"].shape[1], more["input_ids"].shape[1])
    joined = Batch.concat([left_pad(prompts, width), left_pad(more, width)])
    assert joined["input_ids"].shape == (4 + EXTRA, width)
    # The same tokens, in the same order, under attention 1; the drawn batches unchanged.
    for part, rows in ((prompts, slice(0, 4)), (more, slice(4, None))):
        real = part["input_ids"][part["attention_mask"].bool()]
        assert torch.equal(joined["input_ids"][rows][joined["attention_mask"][rows].bool()], real)
    assert prompts["input_ids"].shape[1] < width or more["input_ids"].shape[1] < width


def test_the_stream_advances_one_position_for_the_trainer_and_the_program() -> None:
    from hfsdk.core.trainer.preflight import prepare_run

    spec = hfsdk.get_registry("algorithms")["grpo"].impl
    config = load_run_config("grpo", None, SMALL)
    loader = prepare_run(config, spec).loader
    loader.load_state_dict({"epoch": 0, "index": 0, "order": 2})
    first = loader.next_batch()
    extra = loader.next_batch(EXTRA)
    assert (len(first), len(extra)) == (4, EXTRA)
    assert loader.state_dict() == {"epoch": 0, "index": 4 + EXTRA, "order": 2}
    loader.load_state_dict({"epoch": 0, "index": 4, "order": 2})
    assert torch.equal(loader.next_batch(EXTRA)["input_ids"], extra["input_ids"])
    with pytest.raises(HfsdkError, match="n >= 1"):
        loader.next_batch(0)


def test_a_context_without_prompts_says_how_to_give_them() -> None:
    spec = hfsdk.get_registry("algorithms")["grpo"].impl
    config = load_run_config("grpo", None, SMALL)
    algorithm = spec.program(AlgorithmContext(config=config, roles={}, signals={}, spec=spec))
    with pytest.raises(HfsdkError, match="no prompt source; pass prompts="):
        _ = algorithm.prompts


def test_extra_stages_are_declared_names_of_the_preparation_stage() -> None:
    grpo = hfsdk.get_registry("algorithms")["grpo"].impl
    spec = attrs.evolve(grpo, name="more", extra_stages=("dynamic_sampling",))
    assert "dynamic_sampling" in spec.timings and "dynamic_sampling" not in grpo.timings
    preparation = next(s for s in spec.dataflow.stages if s.name == "preparation")
    assert preparation.timed_names[-1] == "dynamic_sampling"
    with pytest.raises(ValueError, match="extra stage 'advantages' is declared twice"):
        attrs.evolve(grpo, name="more", extra_stages=("advantages",))
    with pytest.raises(ValueError, match="extra stage 'Bad Name'"):
        attrs.evolve(grpo, name="more", extra_stages=("Bad Name",))
