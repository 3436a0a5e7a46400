"""Settings that only fail deep inside a run, refused before it starts in one line each.

- ``rollout.max_prompt_length`` not what follows from ``data.max_prompt_length`` (the
  one key; plus a rollout sub-section's response budget, e.g. multi-turn rollouts',
  which every turn's context may reach): vLLM
  then failed much later with "528 > 128 positions";
- ``trainer.keep_best`` on a validation metric when no saved step validates, and (once
  the first step has reported) on a metric the run does not report.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

from hfsdk.core.errors import ConfigError


def check_prompt_length(config: Any) -> None:
    """``rollout.max_prompt_length`` must be what follows from ``data.max_prompt_length``
    (plus a rollout sub-section's response budget: every turn's context may reach it)."""
    from hfsdk.core.config.rollout_sections import response_budget

    data = getattr(getattr(config, "data", None), "max_prompt_length", None)
    rollout = getattr(getattr(config, "rollout", None), "max_prompt_length", None)
    if data is None or rollout is None:
        return
    extra, key = response_budget(config.rollout.subsections) or (0, "")
    if rollout != data + extra:
        rule = "data.max_prompt_length" + (f" + {key} ({extra})" if extra else "")
        raise ConfigError(
            f"rollout.max_prompt_length={rollout} disagrees with data.max_prompt_length={data}; "
            f"it follows from them ({rule}): remove rollout.max_prompt_length"
        )


def check_keep_best_source(config: Any, has_validation_data: bool) -> None:
    """``keep_best`` reads metrics.jsonl, and on a ``val/`` metric needs validated save steps."""
    trainer = config.trainer
    metric, val, save = trainer.keep_best, trainer.val_every, trainer.save_every
    if metric and "jsonl" not in trainer.loggers:  # else it ranks an earlier run's steps, or none
        raise ConfigError(f"trainer.keep_best={metric} ranks the steps in metrics.jsonl; add "
                          "jsonl to trainer.loggers")  # fmt: skip
    if not metric or not metric.startswith("val/"):
        return
    if not val or not has_validation_data:
        why = "trainer.val_every is 0" if not val else "there is no data.val_files"
        raise ConfigError(
            f"trainer.keep_best={metric} is a validation metric but no validation runs ({why}); "
            "set trainer.val_every (a multiple of trainer.save_every) and data.val_files, or "
            "keep_best on a training metric such as reward/mean"
        )
    if val % save if save else trainer.total_steps % val:  # best_step ranks only saved steps
        raise ConfigError(
            f"trainer.keep_best={metric} ranks validated steps that have a checkpoint, but "
            f"trainer.val_every={val} validates steps trainer.save_every={save} does not save; "
            "set trainer.val_every to a multiple of trainer.save_every (with save_every=0, a "
            "divisor of trainer.total_steps)"
        )


def check_keep_best_reported(metric: str, reported: Iterable[str]) -> None:
    """After the first step that could report ``metric``: refuse it if that step did not."""
    names = sorted(reported)
    if metric in names:
        return
    close = difflib.get_close_matches(metric, names, n=3)
    hint = f"did you mean {', '.join(close)}? " if close else ""
    prefix = "val/" if metric.startswith("val/") else ""
    some = [n for n in names if n.startswith(prefix)][:8]
    raise ConfigError(
        f"trainer.keep_best={metric}: the run reports no such metric; {hint}"
        f"reported: {', '.join(some)}{', ...' if len(names) > len(some) else ''}"
    )
