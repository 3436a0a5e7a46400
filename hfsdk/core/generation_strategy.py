"""How an actor worker generates: the rollout's ``generate_sequences``, or a plugin's strategy.

A generation strategy replaces one ``generate_sequences`` call with something
built on the rollout contract (an agent loop that calls tools between turns,
for instance). Plugins offer one through the ``hfsdk_wrap_generation`` hook
(``firstresult``: the first plugin that answers for a rollout wins); the core
asks once per rollout, when :func:`~hfsdk.core.rollout_contract.build_rollout`
builds it, and every worker calls :func:`generate_rollout`, so training
backends and rollout backends need not know which plugin generates.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from hfsdk.core.errors import HfsdkError

if TYPE_CHECKING:
    from hfsdk.core.batch import Batch
    from hfsdk.core.plugin_manager import HfsdkPluginManager
    from hfsdk.core.rollout_contract import RolloutBackend


@runtime_checkable
class GenerationStrategy(Protocol):
    """What ``hfsdk_wrap_generation`` returns: responses for a batch of prompts.

    ``generate(prompts)`` returns what ``RolloutBackend.generate_sequences`` would
    (``prompts.meta['n']`` responses per prompt, the same keys, padded to
    ``rollout.response_width()``), and it is called where that would be: on every
    actor rank when the rollout is ``collective``, else on the collecting ranks.
    """

    def generate(self, prompts: Batch) -> Batch:
        """Responses for ``prompts``."""
        ...


class SequencesStrategy:
    """The default strategy: the rollout's own ``generate_sequences``."""

    def __init__(self, rollout: RolloutBackend) -> None:
        self.rollout = rollout

    def generate(self, prompts: Batch) -> Batch:
        """``rollout.generate_sequences(prompts)``."""
        return self.rollout.generate_sequences(prompts)


def resolve_generation(
    rollout: RolloutBackend, pm: HfsdkPluginManager | None = None
) -> GenerationStrategy:
    """The strategy of ``rollout``: a plugin's (``hfsdk_wrap_generation``), else its own.

    Stored on the rollout, so the hook runs once per rollout, never per step.
    """
    from hfsdk.core.plugin_manager import get_plugin_manager

    pm = pm or get_plugin_manager()
    strategy = pm.hook.hfsdk_wrap_generation(rollout=rollout)
    if strategy is None:
        strategy = SequencesStrategy(rollout)
    elif not isinstance(strategy, GenerationStrategy):
        raise HfsdkError(
            f"hfsdk_wrap_generation returned {type(strategy).__name__}, which has no "
            "generate(prompts) method; return an hfsdk.GenerationStrategy or None"
        )
    rollout.generation = strategy
    return strategy


def generate_rollout(rollout: RolloutBackend, prompts: Batch) -> Batch:
    """Responses for ``prompts`` through ``rollout``'s generation strategy.

    The one call a worker makes where it would call ``generate_sequences``;
    the strategy was resolved when the rollout was built (here for a rollout
    built another way, as tests do).
    """
    strategy = rollout.generation or resolve_generation(rollout)
    return strategy.generate(prompts)
