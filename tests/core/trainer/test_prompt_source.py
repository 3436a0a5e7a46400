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

EXTRA = 2
SMALL = [
    "data.batch_size=4",
    "algorithm.n_samples_per_prompt=2",
    "actor.mini_batch_size=4",
    "actor.micro_batch_size=8",
    "trainer.executor=local",
]
COMPARED = ("reward/mean", "actor/pg_loss", "actor/grad_norm", "data/extra_prompt_ids")


def _draw_more_spec() -> hfsdk.AlgorithmSpec:
    """GRPO whose step draws ``EXTRA`` more prompts (as DAPO's dynamic sampling would)."""
    grpo = hfsdk.get_registry("algorithms")["grpo"].impl

    class DrawMore(grpo.program):  # type: ignore[misc, name-defined]
        """GRPO on the step's prompts plus EXTRA more drawn from the run's stream."""

        def step(self, prompts: Batch) -> dict[str, float]:
            with self.stage("dynamic_sampling"):
                extra = self.prompts.next_batch(EXTRA)
            metrics = super().step(Batch.concat([prompts, extra]))
            # Which prompts were drawn: a resume from another data position would differ.
            ids = extra["input_ids"] * (extra["attention_mask"] > 0)
            weights = torch.arange(1, ids.numel() + 1).view_as(ids)
            metrics["data/extra_prompt_ids"] = float((ids * weights).sum())
            metrics["data/prompts"] = float(len(prompts) + len(extra))
            return metrics

    return attrs.evolve(
        grpo, name="draw_more", program=DrawMore, extra_stages=("dynamic_sampling",)
    )


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
    def fit(run: str, steps: int) -> list[dict]:
        config = load_run_config("draw_more", None, [*SMALL, f"trainer.total_steps={steps}"])
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


def test_the_stream_advances_one_position_for_the_trainer_and_the_program() -> None:
    from hfsdk.core.trainer.preflight import prepare_run

    spec = hfsdk.get_registry("algorithms")["grpo"].impl
    config = load_run_config("grpo", None, SMALL)
    loader = prepare_run(config, spec).loader
    loader.load_state_dict({"epoch": 0, "index": 0})
    first = loader.next_batch()
    extra = loader.next_batch(EXTRA)
    assert (len(first), len(extra)) == (4, EXTRA)
    assert loader.state_dict() == {"epoch": 0, "index": 4 + EXTRA}
    loader.load_state_dict({"epoch": 0, "index": 4})
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
