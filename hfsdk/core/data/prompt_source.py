"""What the trainer needs from a run's prompts, and the hook that builds them.

The core loads no dataset: a plugin answers ``hfsdk_load_prompts`` (first
answer wins) with a :class:`RunPrompts` built from the run's files and
tokenizer. A run whose prompts no plugin loads stops with
:data:`NO_PROMPT_PLUGIN`, one line naming what to install.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from hfsdk.core.errors import HfsdkError

if TYPE_CHECKING:
    from hfsdk.core.batch import Batch


class PromptStream(Protocol):
    """The training prompts as the trainer holds them: the :class:`hfsdk.PromptSource` an
    algorithm draws from, plus the position every checkpoint saves."""

    def next_batch(self, n: int | None = None) -> Batch:
        """The next ``n`` prompts (default ``data.batch_size``), left-padded, wrapping epochs."""
        ...

    def state_dict(self) -> dict[str, int]:
        """The stream's position, saved in every checkpoint."""
        ...

    def load_state_dict(self, state: Mapping[str, int]) -> None:
        """Continue from a position :meth:`state_dict` returned."""
        ...


class PromptSet(Protocol):
    """The validation prompts: all of them at once, in file order."""

    def whole(self) -> Batch:
        """Every prompt as one left-padded batch (a new batch per call: callers mutate meta)."""
        ...


@attrs.frozen(kw_only=True)
class PromptRequest:
    """What a prompt plugin loads from (``hfsdk_load_prompts``)."""

    config: Any
    """The resolved run config (its ``data`` section, ``trainer.seed``)."""
    train_files: tuple[str, ...]
    val_files: tuple[str, ...]
    """Empty: the run validates on nothing."""
    tokenizer: Any
    tokenizer_path: str
    builtin_tokenizer: bool
    """Whether the tokenizer is the built-in task's (no model or tokenizer path configured)."""
    tools: Sequence[Mapping[str, Any]] = ()
    """OpenAI-style schemas of the tools the prompts announce (the chat template's ``tools``)."""


@attrs.frozen(kw_only=True)
class RunPrompts:
    """A run's loaded, checked and tokenised prompts."""

    train: PromptStream
    validation: PromptSet | None
    row_columns: tuple[str, ...]
    """The columns of a training row (the dataset's and the loader's): what the run checks
    each reward function's signature against."""


NO_PROMPT_PLUGIN = (
    "this run needs a prompt dataset plugin to load data.train_files (or the built-in task's "
    "prompts), and none is installed or enabled (it implements hfsdk_load_prompts); install "
    "hfsdk-plugin-datasets (pip install hfsdk-plugin-datasets, and drop it from "
    "HFSDK_DISABLE_PLUGINS)"
)
"""The one line a run stops with when no plugin loads its prompts."""


def prompts_for_run(request: PromptRequest) -> RunPrompts:
    """The run's prompts, from the first plugin that loads them."""
    from hfsdk.core.plugin_manager import get_plugin_manager

    manager = get_plugin_manager()
    prompts = manager.hook.hfsdk_load_prompts(request=request)
    if prompts is None:  # a plugin that failed to import may be the one meant
        raise HfsdkError(NO_PROMPT_PLUGIN + manager.failed_plugins_note())
    return prompts
