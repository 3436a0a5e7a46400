"""The reward contract: what the trainer calls to score a batch with a signal's functions.

A signal section (``reward``, ``cost``, ...) that lists ``functions`` is scored by a
:class:`RewardScorer`, built once per run and section by the plugin that answers
``hfsdk_build_reward_scorer``; how functions are found, called and composed is that
plugin's. Without one, a run that names functions stops before any worker starts with
one line naming the distribution to install.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from hfsdk.core.errors import HfsdkError

if TYPE_CHECKING:
    from hfsdk.core.plugin_manager import HfsdkPluginManager

REWARDS_DISTRIBUTION = "hfsdk-plugin-rewards"
"""The distribution whose plugin scores reward functions by default."""


@runtime_checkable
class RewardScorer(Protocol):
    """Scores a batch with a signal section's functions (what ``hfsdk_build_reward_scorer``
    returns; the trainer calls :meth:`score` once per batch, on the controller)."""

    def score(
        self, prompts: Sequence[str], responses: Sequence[str], columns: Mapping[str, Sequence[Any]]
    ) -> tuple[list[float], dict[str, float]]:
        """One float per response (the section's weighted sum) and metrics to log.

        ``columns`` are the batch's dataset columns, one value per response each.
        A function that misbehaves raises :class:`hfsdk.HfsdkError` (one line).
        """
        ...


def build_reward_scorer(
    section: str, config: Any, pm: HfsdkPluginManager | None = None
) -> RewardScorer:
    """The scorer of signal section ``section`` (its config ``config`` lists functions),
    from ``pm``'s plugins (default: the process's plugin manager).

    Raises one :class:`hfsdk.HfsdkError` line when no installed, enabled plugin builds
    scorers, saying which distribution to install (or why it did not load).
    """
    from hfsdk.core.cli.known_commands import MissingPluginError, missing_plugin_message
    from hfsdk.core.plugin_manager import get_plugin_manager

    hook = (pm or get_plugin_manager()).hook.hfsdk_build_reward_scorer
    scorer = hook(section=section, config=config)
    if scorer is None:
        what = f"scoring {section}.functions (the reward runtime)"
        message = missing_plugin_message(what, REWARDS_DISTRIBUTION)
        raise MissingPluginError(
            f"{message}; or score {section} with a model ({section}.model.model_path=DIR)"
        )
    if not isinstance(scorer, RewardScorer):
        raise HfsdkError(
            f"hfsdk_build_reward_scorer returned a {type(scorer).__name__} for {section!r}; "
            "expected an object with score(prompts, responses, columns) (hfsdk.RewardScorer)"
        )
    return scorer


__all__ = ["REWARDS_DISTRIBUTION", "RewardScorer", "build_reward_scorer"]
