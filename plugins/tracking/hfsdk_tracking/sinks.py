"""The ``tensorboard`` and ``wandb`` metric sinks and the ``wandb`` config section.

Each sink is built once per run by the core's tracker (``trainer.loggers`` lists it)
with ``open(run_dir=, config=, start_step=)`` and then gets every step's metrics
(``log``), the validation samples (``log_samples``) and ``close``. A resumed run
(``start_step`` > 0) continues the same wandb run (its id is kept in the run dir) and
tells TensorBoard to drop what the crashed run logged after the checkpoint.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from pathlib import Path
from typing import Any, Literal

import attrs

from hfsdk import HfsdkError, help_field, write_text_atomic

logger = logging.getLogger(__name__)

DISTRIBUTION = "hfsdk-plugin-tracking"
WANDB_ID_FILE = "wandb_run_id"
"""The wandb run id of a run directory: a restart resumes that wandb run."""
WANDB_MODES = ("online", "offline", "disabled", "shared", "dryrun", "run")
"""The values wandb accepts in ``$WANDB_MODE`` (its ``Settings.mode``)."""


@attrs.frozen(kw_only=True)
class WandbConfig:
    """Where a wandb run goes (``trainer.loggers`` with ``wandb``).

    An unset field is taken from wandb's own environment variables
    (``WANDB_MODE``, ``WANDB_PROJECT``, ``WANDB_ENTITY``, ``WANDB_NAME``), then
    wandb's defaults. The run id is kept in ``RUN_DIR/wandb_run_id``, so a
    resumed run continues the same wandb run.
    """

    mode: Literal["online", "offline", "disabled"] | None = help_field(
        "online, offline (synced later with `wandb sync`) or disabled; null: $WANDB_MODE, "
        "else online.",
        default=None,
        validator=attrs.validators.optional(
            attrs.validators.in_(("online", "offline", "disabled"))
        ),
    )
    project: str | None = help_field(
        "wandb project; null: $WANDB_PROJECT, else wandb's default.", default=None
    )
    entity: str | None = help_field(
        "wandb entity (user or team); null: $WANDB_ENTITY, else your default entity.",
        default=None,
    )
    name: str | None = help_field(
        "Display name of the run; null: $WANDB_NAME, else the run directory's name.",
        default=None,
    )


def missing_package_problems(loggers: tuple[str, ...]) -> list[str]:
    """One line per sink in ``loggers`` whose package is not installed (each sink is named
    after its package), so a run stops before any worker starts rather than at its first step."""
    return [
        f"trainer.loggers asks for {name}, which is not installed; "
        f"pip install '{DISTRIBUTION}[{name}]' or remove it from trainer.loggers"
        for name in loggers
        if name in ("tensorboard", "wandb") and importlib.util.find_spec(name) is None
    ]


def wandb_mode_problems(loggers: tuple[str, ...]) -> list[str]:
    """A line when ``loggers`` has wandb and ``$WANDB_MODE`` is no wandb mode: wandb refuses
    it at ``wandb.init`` (even with ``wandb.mode`` set), after the workers started, in a
    multi-line message of which only the first line was shown."""
    mode = os.environ.get("WANDB_MODE")
    if "wandb" not in loggers or mode is None or mode in WANDB_MODES:
        return []
    return [
        f"WANDB_MODE={mode!r} is not a wandb mode; expected one of {', '.join(WANDB_MODES)}: "
        "fix or unset the environment variable"
    ]


def unused_wandb_settings(config: Any) -> str | None:
    """A warning when the ``wandb`` section (or the old ``trainer.wandb``) sets something while
    ``trainer.loggers`` has no wandb: no wandb run starts, and the settings did nothing. Not an
    error: a config file may keep its wandb settings while a run turns the logger off."""
    loggers = tuple(config.trainer.loggers)
    settings = getattr(config, "sections", {}).get("wandb")
    if "wandb" in loggers or settings is None:
        return None
    default = WandbConfig()
    changed = [
        f"wandb.{field.name}={getattr(settings, field.name)!r}"
        for field in attrs.fields(WandbConfig)
        if getattr(settings, field.name) != getattr(default, field.name)
    ]
    if not changed:
        return None
    return (
        f"{', '.join(changed)} {'is' if len(changed) == 1 else 'are'} set but trainer.loggers "
        f"({', '.join(loggers)}) has no wandb, so nothing is sent to wandb; add wandb to "
        "trainer.loggers to log there"
    )


def sink_packages_check(config: Any, spec: Any, prepared: Any) -> None:
    """The ``sink_packages`` preflight check (:func:`missing_package_problems`,
    :func:`wandb_mode_problems`); warns of wandb settings no logger reads."""
    _require(*config.trainer.loggers)
    unused = unused_wandb_settings(config)
    if unused is not None:
        logger.warning(unused)


def _require(*loggers: str) -> None:
    problems = missing_package_problems(loggers) + wandb_mode_problems(loggers)
    if problems:
        raise HfsdkError(problems[0])


class TensorboardSink:
    """TensorBoard event files in RUN_DIR/tensorboard: scalars, a val/samples table."""

    def __init__(self, writer: Any) -> None:
        self._tb = writer

    @classmethod
    def open(cls, *, run_dir: Path, config: Any = None, start_step: int = 0) -> TensorboardSink:
        """Event files in ``RUN_DIR/tensorboard``; a resumed run purges the steps after its
        checkpoint, a run started afresh every step an earlier one logged there."""
        _require("tensorboard")
        from torch.utils.tensorboard import SummaryWriter

        # Steps after the checkpoint (all of them, with none) were logged by a run that
        # crashed: TensorBoard drops them on read.
        purge = start_step + 1 if start_step > 0 else 0
        return cls(SummaryWriter(log_dir=str(run_dir / "tensorboard"), purge_step=purge))

    def log(self, step: int, metrics: dict[str, float]) -> None:
        """One scalar per metric, on disk when this returns."""
        for key, value in metrics.items():
            self._tb.add_scalar(key, value, step)
        # SummaryWriter writes only every flush_secs (120 s) or on close: a kill -9 would lose
        # the steps since, and the resumed run's purge_step would make that loss permanent.
        self._tb.flush()

    def log_samples(self, step: int, samples: list[dict[str, Any]]) -> None:
        """A markdown table under ``val/samples``."""
        rows = ["| prompt | response | score |", "|---|---|---|"]
        for s in samples:
            cells = [
                str(s.get(k, "")).replace("|", "\\|").replace("\n", " ")
                for k in ("prompt", "response")
            ]
            rows.append(f"| {cells[0]} | {cells[1]} | {s.get('score', '')} |")
        self._tb.add_text("val/samples", "\n".join(rows), step)

    def close(self) -> None:
        """Flush and close the event file."""
        self._tb.close()


class WandbSink:
    """A wandb run per run directory (resumed with it), set up by the wandb section."""

    def __init__(self, run: Any) -> None:
        self._wandb = run

    @classmethod
    def open(cls, *, run_dir: Path, config: Any = None, start_step: int = 0) -> WandbSink:
        """The run's wandb run, set up by the config's ``wandb`` section."""
        _require("wandb")
        sections = getattr(config, "sections", {})
        settings = sections.get("wandb") or WandbConfig()
        return cls(start_wandb(run_dir, settings, config.to_dict() if config is not None else {}))

    def log(self, step: int, metrics: dict[str, float]) -> None:
        """The step's metrics at ``step``."""
        self._wandb.log(metrics, step=step)

    def log_samples(self, step: int, samples: list[dict[str, Any]]) -> None:
        """A ``wandb.Table`` under ``val/samples``."""
        import wandb

        table = wandb.Table(columns=["prompt", "response", "score"])
        for s in samples:
            table.add_data(s.get("prompt"), s.get("response"), s.get("score"))
        self._wandb.log({"val/samples": table}, step=step)

    def close(self) -> None:
        """Finish the wandb run."""
        self._wandb.finish()


def start_wandb(run_dir: Path, settings: WandbConfig, config: dict[str, Any]) -> Any:
    """``wandb.init`` for ``run_dir``: the run whose id the directory keeps, else a new one.

    Unset settings are left to wandb, which reads ``WANDB_MODE``, ``WANDB_PROJECT``,
    ``WANDB_ENTITY`` and ``WANDB_NAME``; ``WANDB_RUN_ID`` names a new run's id.
    """
    import os
    import secrets
    import string

    import wandb

    id_file = run_dir / WANDB_ID_FILE
    if id_file.is_file():
        run_id = id_file.read_text().strip()
    else:
        alphabet = string.ascii_lowercase + string.digits  # wandb's id alphabet
        run_id = os.environ.get("WANDB_RUN_ID") or "".join(
            secrets.choice(alphabet) for _ in range(8)
        )
        write_text_atomic(id_file, run_id + "\n")
    # Resolved: `--run-dir .` is Path("."), whose name is "" (wandb would pick a random one).
    name = settings.name or os.environ.get("WANDB_NAME") or run_dir.resolve().name
    return wandb.init(
        id=run_id,
        resume="allow",
        mode=settings.mode,
        project=settings.project,
        entity=settings.entity,
        name=name,
        dir=str(run_dir),
        config=config,
    )
