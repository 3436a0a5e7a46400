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
    config: RunConfig,
    policy_role: str,
    *,
    cold_model: bool = False,
    preference_pairs: bool = False,
) -> RunAssets:
    """Paths of the model, tokenizer and data; builds the default task's assets when needed.

    The tokenizer is the policy's: ``policy_role`` names the spec's role of kind
    ``policy`` (``AlgorithmSpec.policy_role``); no role name is assumed.
    ``cold_model``: a run without a model path starts from the default task's
    freshly initialised model instead of the warm-started one
    (``AlgorithmSpec.default_model``); the tokenizer and data are the same.
    ``preference_pairs``: the default task's data are its preference pairs
    (``AlgorithmSpec.default_data``, :mod:`hfsdk.core.default_task.pairs`).
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
    from hfsdk.core.default_task import ensure_default_assets

    assets = ensure_default_assets()
    model_dir = assets.model_dir
    if cold_model and actor_path is None:
        cold = ensure_default_assets(attrs.evolve(assets.spec, warm_start_steps=0))
        model_dir = cold.model_dir
    train_jsonl, val_jsonl = assets.train_jsonl, assets.val_jsonl
    if preference_pairs:
        from hfsdk.core.default_task.pairs import ensure_preference_pairs

        train_jsonl, val_jsonl = ensure_preference_pairs(assets)
    return RunAssets(
        model_path=actor_path or str(model_dir),
        tokenizer_path=tokenizer_path or actor_path or str(assets.tokenizer_dir),
        train_files=tuple(config.data.train_files) or (str(train_jsonl),),
        val_files=tuple(config.data.val_files)
        or ((str(val_jsonl),) if not config.data.train_files else ()),
        default_task=not config.data.train_files,
    )


class SignalScorer:
    """Scores generated samples with a signal's functions (on the controller) and/or model."""

    def __init__(self, name: str, config: SignalConfig, model: Any | None) -> None:
        self.name = name
        self.config = config
        self.model = model
        self._functions = None
        if config.functions:
            from hfsdk.core.rewards import load_reward_functions

            # Once per run (names, styles): a bad entry fails before training, not at step 1.
            self._functions = load_reward_functions(config)

    def __call__(self, batch: Batch) -> tuple[torch.Tensor, dict[str, float]]:
        scores = torch.zeros(len(batch), dtype=torch.float32)
        metrics: dict[str, float] = {}
        if self.config.functions:
            from hfsdk.core.rewards import compute_rewards

            skip = {"raw_prompt", "response_text"}
            columns = {k: list(batch[k]) for k in batch.non_tensor_keys if k not in skip}
            values, metrics = compute_rewards(
                list(batch["raw_prompt"]),
                list(batch["response_text"]),
                columns,
                self.config,
                section=self.name,
                functions=self._functions,
            )
            scores += torch.tensor(values, dtype=torch.float32)
        if self.model is not None:
            model_scores = self.model.compute_scores(batch)["rm_scores"].float()
            metrics["model_score_mean"] = float(model_scores.mean())
            scores += model_scores
        return scores, metrics


def signal_config_of(config: RunConfig, role: str, default_task: bool) -> SignalConfig:
    signal: SignalConfig = getattr(config, role)
    if signal.functions or signal.model is not None:
        return signal
    if default_task:
        from hfsdk.core.default_task import COST_FUNCTION_NAME, REWARD_FUNCTION_NAME

        # The default task scores two signals; a scorer role by another name must be set.
        name = {"reward": REWARD_FUNCTION_NAME, "cost": COST_FUNCTION_NAME}.get(role)
        if name is not None:
            return attrs.evolve(signal, functions=(SignalFunction(name=name),))
    raise HfsdkError(
        f"the {role!r} signal has neither functions nor a model; set e.g. "
        f"{role}.functions=[{{name: exact_match}}] or {role}.model.model_path=DIR"
    )


# Their library chatter (load reports, save progress bars) would drown the console; the
# thread count (OMP_NUM_THREADS) is each worker's share of the cores, see worker_threads().
