"""Configuration of DPO (the ``algorithm`` section of ``--algo dpo``); β is ``policy_loss.beta``."""

from __future__ import annotations

import attrs

from hfsdk import AlgorithmConfig, help_field


@attrs.frozen(kw_only=True)
class DPOConfig(AlgorithmConfig):
    """DPO: the policy learns from preference pairs against a frozen reference.

    Each row holds ``chosen_key`` and ``rejected_key`` (text or messages) and
    optionally the prompt in ``data.prompt_key`` (TRL's explicit-prompt layout);
    without a prompt column the shared beginning of the two is the prompt (set
    ``data.prompt_key`` to ``chosen_key`` then, since the data loader needs a
    column to read). β and label smoothing are the ``policy_loss`` section.
    """

    advantage_estimator: str | None = help_field(
        "DPO estimates no advantages; leave null.",
        default=None,
    )
    policy_loss: str = help_field(
        "The pairwise loss: dpo (sigmoid; settings policy_loss.beta, policy_loss.label_smoothing).",
        default="dpo",
    )
    chosen_key: str = help_field("Column of the preferred response.", default="chosen")
    rejected_key: str = help_field("Column of the dispreferred response.", default="rejected")
    tools_key: str = help_field(
        "Column holding a row's tool schemas (OpenAI form, a list or its JSON string), given "
        "to the chat template of both responses as their tools (as SFT's tools_key); rows "
        "without it get none.",
        default="tools",
    )
    max_length: int | None = help_field(
        "Pairs whose prompt plus longer response exceed this many tokens are dropped from a "
        "step (dpo/dropped_pairs; a step left with none draws the next rows), and data "
        "whose every pair is longer is refused before the run; null keeps every pair.",
        default=None,
        validator=attrs.validators.optional(attrs.validators.ge(2)),
    )
    append_eos: bool = help_field(
        "End both responses with the tokenizer's EOS token, as a rollout's end.",
        default=True,
    )
