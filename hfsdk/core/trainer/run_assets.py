"""What a run needs before any worker starts: model/tokenizer paths, tokenizer, signals.

Shared by the preflight checks and the training session (neither imports the other
for these).
"""

from __future__ import annotations

import logging
from typing import Any

import attrs
import torch

from hfsdk.core.batch import Batch
from hfsdk.core.config.run_config import RunConfig
from hfsdk.core.config.signal_config import SignalConfig, SignalFunction
from hfsdk.core.errors import HfsdkError
from hfsdk.core.reward_scoring import RewardScorer

logger = logging.getLogger(__name__)


@attrs.frozen(kw_only=True)
class RunAssets:
    """Concrete paths a run uses, after the default task filled in what the config left out."""

    model_path: str | None
    tokenizer_path: str
    train_files: tuple[str, ...]
    val_files: tuple[str, ...]
    default_task: bool


def resolve_assets(
    config: RunConfig, policy_role: str, *, cold_model: bool = False, preference_pairs: bool = False
) -> RunAssets:
    """Paths of the model, tokenizer and data; builds the default task's assets when needed.

    The tokenizer is the policy's: ``policy_role`` names the spec's role of kind
    ``policy`` (``AlgorithmSpec.policy_role``); no role name is assumed.
    The default task is the task registry's (:func:`hfsdk.core.tasks.get_task`).
    ``cold_model``: a run without a model path starts from the default task's
    freshly initialised model instead of the warm-started one
    (``AlgorithmSpec.default_model``); the tokenizer and data are the same.
    ``preference_pairs``: the default task's data are its preference pairs
    (``AlgorithmSpec.default_data``).
    """
    actor_path = getattr(getattr(config, policy_role), "model_path", None)
    tokenizer_path = getattr(getattr(config, policy_role), "tokenizer_path", None)
    uses_default = actor_path is None or not config.data.train_files
    if not uses_default:
        return RunAssets(
            model_path=actor_path,
            tokenizer_path=tokenizer_path or actor_path,
            train_files=tuple(config.data.train_files),
            val_files=tuple(config.data.val_files),
            default_task=False,
        )
    from hfsdk.core.tasks import get_task

    task = get_task()  # the registry's default task; one line names its plugin when missing
    model = "cold" if cold_model and actor_path is None else "warm"
    built = task.build(model=model, data="preference_pairs" if preference_pairs else "prompts")
    return RunAssets(
        model_path=actor_path or str(built.model_dir),
        tokenizer_path=tokenizer_path or actor_path or str(built.tokenizer_dir),
        train_files=tuple(config.data.train_files) or built.train_files,
        val_files=tuple(config.data.val_files)
        or (built.val_files if not config.data.train_files else ()),
        default_task=not config.data.train_files,
    )


class SignalScorer:
    """Scores generated samples with a signal's functions (on the controller) and/or model.

    ``functions``: the section's :class:`~hfsdk.core.reward_scoring.RewardScorer`, built
    once per run by the preflight (``PreparedRun.reward_scorers``); ``None`` when the
    section lists no functions.
    """

    def __init__(
        self, name: str, config: SignalConfig, model: Any | None, functions: RewardScorer | None
    ) -> None:
        self.name = name
        self.config = config
        self.model = model
        self._functions = functions

    def __call__(self, batch: Batch) -> tuple[torch.Tensor, dict[str, float]]:
        scores = torch.zeros(len(batch), dtype=torch.float32)
        metrics: dict[str, float] = {}
        if self._functions is not None:
            skip = {"raw_prompt", "response_text"}
            columns = {k: list(batch[k]) for k in batch.non_tensor_keys if k not in skip}
            values, metrics = self._functions.score(
                list(batch["raw_prompt"]), list(batch["response_text"]), columns
            )
            scores += torch.tensor(values, dtype=torch.float32)
        if self.model is not None:
            model_scores = self.model.compute_scores(batch)["rm_scores"].float()
            metrics["model_score_mean"] = float(model_scores.mean())
            scores += model_scores
        return scores, metrics


def signal_config_of(config: RunConfig, role: str, default_task: bool) -> SignalConfig:
    """The ``role`` signal's config; on the default task, its reward functions when the
    config names none (the task registry's ``Task.signals``)."""
    signal: SignalConfig = getattr(config, role)
    if signal.functions or signal.model is not None:
        return signal
    if default_task:
        from hfsdk.core.tasks import get_task

        # The default task scores the signals it names; a scorer role by another name must be set.
        names = get_task().signals.get(role, ())
        if names:
            return attrs.evolve(signal, functions=tuple(SignalFunction(name=n) for n in names))
    raise HfsdkError(
        f"the {role!r} signal has neither functions nor a model; set e.g. "
        f"{role}.functions=[{{name: exact_match}}] or {role}.model.model_path=DIR"
    )


def with_signals(config: RunConfig, signals: dict[str, SignalConfig]) -> RunConfig:
    """``config`` with each signal section as the run scores it (the default task's reward
    functions filled in), so the saved ``config.yaml`` shows what really ran."""
    changed = {role: signal for role, signal in signals.items() if config.sections[role] != signal}
    if not changed:
        return config
    return attrs.evolve(config, sections={**config.sections, **changed})


# Their library chatter (load reports, save progress bars) would drown the console; the
# thread count (OMP_NUM_THREADS) is each worker's share of the cores, see worker_threads().
