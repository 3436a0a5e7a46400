"""What ``trainer.rollout_dump`` keeps for replay and for ``trainer.mode: train_only``.

Beside each step's readable ``rollouts/step_N.jsonl`` the trainer writes
``rollouts/step_N.pt``: the step's sampled generations as ``(prompts, generated)``
batches in the order the algorithm drew them (what ``train_only`` trains from), and the
batch exactly as the step's update saw it (what ``hfsdk replay`` updates on again).
Written atomically with ``torch.save``; read back with ``weights_only=True`` and the
checkpoints' allow-list (:func:`hfsdk.load_checkpoint_file`), so a dump from elsewhere
cannot run code.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from hfsdk import HfsdkError

if TYPE_CHECKING:
    from hfsdk import Batch

DUMP_DIR = "rollouts"
_FORMAT = 1


@attrs.frozen(kw_only=True)
class StepDump:
    """One step's dump: its generations and, unless it trained nothing, its update's batch."""

    step: int
    generations: list[tuple[Batch, Batch]]
    update: Batch | None


def step_dump_path(run_dir: str | Path, step: int) -> Path:
    """``run_dir/rollouts/step_<step>.pt``."""
    return Path(run_dir) / DUMP_DIR / f"step_{step}.pt"


def write_step_dump(
    run_dir: str | Path,
    step: int,
    generations: list[tuple[Batch, Batch]],
    update: Batch | None,
) -> Path:
    """Write one step's dump atomically (a temporary file renamed); returns its path."""
    import torch

    from hfsdk import atomic_path

    path = step_dump_path(run_dir, step)
    state = {"format": _FORMAT, "step": step, "generations": generations, "update": update}
    # atomic_path removes its temporary file when the save fails (a full disk left
    # rollouts/.step_N.pt.tmp behind) and fsyncs the directory after the rename.
    with atomic_path(path) as tmp:
        torch.save(state, tmp)
    return path


def dumped_steps(run_dir: str | Path) -> int:
    """How many consecutive steps ``run_dir`` dumped from step 1 (0: no ``step_1.pt``)."""
    step = 1
    while step_dump_path(run_dir, step).is_file():
        step += 1
    return step - 1


def read_step_dump(run_dir: str | Path, step: int, *, for_what: str) -> StepDump:
    """Step ``step``'s dump from ``run_dir``; one clear line when it is missing or unreadable."""
    path = step_dump_path(run_dir, step)
    if not path.is_file():
        raise HfsdkError(
            f"{for_what} needs {str(path)!r}, which does not exist; the run must be made with "
            "trainer.rollout_dump: true (or trainer.mode: rollout_only) for every step it uses"
        )
    from hfsdk import load_checkpoint_file

    try:
        state: Any = load_checkpoint_file(path)
    except HfsdkError:
        raise
    except Exception as exc:
        raise HfsdkError(
            f"{for_what}: {str(path)!r} cannot be read ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''}); it is damaged — rerun that step "
            "with trainer.rollout_dump: true"
        ) from None
    if not isinstance(state, dict) or state.get("format") != _FORMAT:
        raise HfsdkError(
            f"{for_what}: {str(path)!r} is not a step dump of this hfsdk (format "
            f"{state.get('format') if isinstance(state, dict) else None!r}, expected {_FORMAT})"
        )
    if state.get("step") != step:  # a copied or renamed file: its metrics are another step's
        raise HfsdkError(
            f"{for_what}: {str(path)!r} holds step {state.get('step')!r}, not {step}; it was "
            "copied or renamed — rerun that step with trainer.rollout_dump: true"
        )
    return StepDump(step=step, generations=state["generations"], update=state["update"])


class DumpedGenerations:
    """``trainer.mode: train_only``: the prompt stream and the generations of a previous run.

    It stands where the generation pipeline does: step ``N`` draws the prompts step ``N``
    of ``run_dir`` drew, in the same order (a program that draws more within a step, as
    DAPO's dynamic sampling does, gets that run's further draws), and
    :meth:`generated` hands the algorithm the batch generated for them then, instead of
    generating. Everything after generation (log-probs, scores, advantages, the update)
    runs as in training. A step that ends with draws of its dumped step left over is
    refused: the run trained on part of what that step drew (its algorithm or sampling
    settings are not the dumped run's).
    """

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        if not (self.run_dir / DUMP_DIR).is_dir():
            raise HfsdkError(
                f"trainer.rollouts_from={str(run_dir)!r} has no {DUMP_DIR}/ directory; pass the "
                "run directory of a run made with trainer.mode: rollout_only or "
                "trainer.rollout_dump: true"
            )
        self.step = 0
        self._queue: list[tuple[Batch, Batch]] = []
        self._drawn = 0
        """How many draws the current step's dump holds (:meth:`_check_all_drawn` names it)."""
        self._current: tuple[Batch, Batch] | None = None

    def next_batch(self, n: int | None = None) -> Batch:
        """The next prompts the dumped run drew (``n is None``: the first of a new step)."""
        if n is None:
            self._check_all_drawn()  # step_done checked it, unless a caller skipped that
            self.step += 1
            self._queue = list(self._read_step(self.step).generations)
            self._drawn = len(self._queue)
        if not self._queue:
            raise HfsdkError(
                f"trainer.mode=train_only: step {self.step} draws more prompts than the run in "
                f"{str(self.run_dir)!r} did; train with the algorithm and data settings of "
                "the run that wrote the rollouts"
            )
        self._current = self._queue.pop(0)
        prompts = self._current[0]
        if n is not None and len(prompts) != n:
            raise HfsdkError(
                f"trainer.mode=train_only: step {self.step} draws {n} prompts where the run in "
                f"{str(self.run_dir)!r} drew {len(prompts)}; use that run's data settings"
            )
        return prompts

    def _read_step(self, step: int) -> StepDump:
        """Step ``step``'s dump; past the dumped run's last step, one line saying how many
        steps it dumped (the run did use rollout_dump, it was shorter)."""
        what = f"trainer.mode=train_only (step {step})"
        # Counting the dumps stats every file: only when this step's is missing.
        last = 0 if step_dump_path(self.run_dir, step).is_file() else dumped_steps(self.run_dir)
        if 0 < last < step:
            raise HfsdkError(
                f"{what}: the run in {str(self.run_dir)!r} dumped only {last} steps "
                f"(rollouts/step_1.pt..step_{last}.pt); set trainer.total_steps to at most "
                f"{last}, or dump a longer run"
            )
        return read_step_dump(self.run_dir, step, for_what=what)

    def generated(self, prompts: Batch) -> tuple[Batch, dict[str, float]] | None:
        """The dumped generation for ``prompts`` (the batch :meth:`next_batch` returned)."""
        if self._current is None or prompts is not self._current[0]:
            return None
        out = self._current[1]
        self._current = None
        return out, {}

    def step_done(self) -> None:
        """Refuse a step that left some of its dumped draws unused (no weights go anywhere:
        nothing else to keep in step with)."""
        self._check_all_drawn()

    def _check_all_drawn(self) -> None:
        """One line when the step drew fewer batches than the dumped run did: the rest would
        be dropped in silence, and the run would train on part of each dumped step (a DAPO
        dump, whose dynamic sampling draws again, trained with GRPO's single draw)."""
        if not self._queue:
            return
        unused = len(self._queue)
        self._queue = []  # said once
        raise HfsdkError(
            f"trainer.mode=train_only: step {self.step} left {unused} of the {self._drawn} "
            f"draws of the run in {str(self.run_dir)!r} unused (this run drew "
            f"{self._drawn - unused}); train_only must use the dumped run's algorithm and "
            "sampling settings (e.g. DAPO's dynamic sampling draws several batches a step)"
        )

    def state_dict(self) -> dict[str, Any]:
        """The step reached (a resumed train_only run goes on from the next dump)."""
        return {"step": self.step}

    def load_state_dict(self, state: Any) -> None:
        """Restore :meth:`state_dict`."""
        self.step = int(state["step"])
