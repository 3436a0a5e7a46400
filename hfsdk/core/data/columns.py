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
HIDDEN_COLUMNS = frozenset({PROMPT_MESSAGES, RENDERED_PROMPT})
"""Columns passed only to functions that name them (the style adapters)."""
INTERNAL_COLUMNS = frozenset({"raw_prompt", "response_text"})
"""Batch entries that become the ``prompts``/``responses`` arguments, not columns."""
