"""The columns a prompt batch carries besides the dataset's own.

A prompt loader adds them to every row; the reward runtime decides which of
them a reward function sees. verl's nested ``reward_model.ground_truth`` is
lifted to a top-level ``ground_truth`` column by the loader (``docs/migrating.md``).
"""

from __future__ import annotations

PROMPT_MESSAGES = "prompt_messages"
"""Hidden column: the prompt's chat messages (``None`` for plain-string prompts)."""
RENDERED_PROMPT = "rendered_prompt"
"""Hidden column: the prompt text the model saw (chat template applied)."""
DATA_DIR = "data_dir"
"""Hidden column: the folder the row's relative paths (images) resolve from, its file's."""
HIDDEN_COLUMNS = frozenset({PROMPT_MESSAGES, RENDERED_PROMPT, DATA_DIR})
"""Columns passed only to functions that name them (the style adapters)."""
INTERNAL_COLUMNS = frozenset({"raw_prompt", "response_text"})
"""Batch entries that become the ``prompts``/``responses`` arguments, not columns."""


def plain_rendering(messages: list[dict[str, str]]) -> str:
    """Chat messages as plain text (``raw_prompt``, a reward function's ``prompts``): a lone
    user message is its content, else ``role: content`` lines and ``assistant:``."""
    if len(messages) == 1 and messages[0]["role"] == "user":
        return messages[0]["content"]
    return "\n".join([*(f"{m['role']}: {m['content']}" for m in messages), "assistant:"])
