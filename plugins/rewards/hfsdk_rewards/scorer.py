"""The plugin's side of the reward contract: a run's scorer, its preflight and config checks.

:class:`FunctionScorer` is what ``hfsdk_build_reward_scorer`` returns for a signal
section: the section's functions loaded once (:func:`load_reward_functions`), scored
per batch with :func:`compute_rewards`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hfsdk import INTERNAL_COLUMNS, HfsdkError, SignalConfig
from hfsdk_rewards.composition import WeightedReward, compute_rewards, load_reward_functions
from hfsdk_rewards.loading import registered_styles
from hfsdk_rewards.signatures import signature_problem


class FunctionScorer:
    """An :class:`hfsdk.RewardScorer`: a signal section's weighted reward functions."""

    def __init__(self, section: str, config: Any) -> None:
        self.section = section
        self.config = config
        self.functions: list[WeightedReward] = load_reward_functions(config)

    def score(
        self,
        prompts: Sequence[str],
        responses: Sequence[str],
        columns: Mapping[str, Sequence[Any]],
    ) -> tuple[list[float], dict[str, float]]:
        """The weighted sum per response and each function's metrics (:func:`compute_rewards`)."""
        return compute_rewards(
            prompts,
            responses,
            columns,
            self.config,
            section=self.section,
            functions=self.functions,
        )

    def signature_problem(self, columns: Sequence[str]) -> str | None:
        """The first reason a function cannot be called with ``columns``; ``None`` if none."""
        for weighted in self.functions:
            problem = signature_problem(weighted.call, columns)
            if problem:
                return problem
        return None


def check_signatures(config: Any, spec: Any, prepared: Any) -> None:
    """A preflight check: every function of every scored section can be called the way its
    style calls it with the run's dataset columns (one line naming the convention if not),
    and validation's functions with the validation data's columns."""
    if not prepared.row_columns:
        return None
    columns = [name for name in prepared.row_columns if name not in INTERNAL_COLUMNS]
    for scorer in prepared.reward_scorers.values():
        if isinstance(scorer, FunctionScorer):
            problem = scorer.signature_problem(columns)
            if problem:
                raise HfsdkError(problem)
    _check_validation_columns(prepared)
    return None


def _check_validation_columns(prepared: Any) -> None:
    """Validation's scorer against the validation rows' columns: its files may lack a column
    the training files have, and the run then failed at its first validation, after training,
    in a message that blamed "the dataset" without saying which."""
    if prepared.val_loader is None:
        return
    # Validation scores with the reward signal, else the first one (the session's choice).
    roles = list(prepared.signal_configs)
    role = "reward" if "reward" in roles else next(iter(roles), None)
    scorer = prepared.reward_scorers.get(role)
    if not isinstance(scorer, FunctionScorer):
        return
    # PromptSet's one method: the columns a validation batch carries, whatever plugin loaded it.
    keys = prepared.val_loader.whole().non_tensor_keys
    problem = scorer.signature_problem([name for name in keys if name not in INTERNAL_COLUMNS])
    if problem:
        files = list(prepared.assets.val_files)
        raise HfsdkError(f"the validation data (data.val_files={files}): {problem}")


def style_problems(config: Any) -> list[str]:
    """One line per function whose ``style`` names no registered reward call style."""
    problems: list[str] = []
    styles = None
    for role, section in config.sections.items():
        if not isinstance(section, SignalConfig):
            continue
        for index, function in enumerate(section.functions):
            if function.style is None:
                continue
            styles = styles or registered_styles()
            try:
                styles.check_name(function.name or "remote", function.style)
            except HfsdkError as exc:
                problems.append(f"config key '{role}.functions[{index}].style': {exc}")
    return problems
