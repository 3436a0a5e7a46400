"""Configuration of supervised fine-tuning (the ``algorithm`` section of ``--algo sft``)."""

from __future__ import annotations

import attrs

from hfsdk import AlgorithmConfig, help_field


@attrs.frozen(kw_only=True)
class SFTConfig(AlgorithmConfig):
    """SFT: train the actor on given responses, loss on assistant tokens only.

    A row is either a whole conversation in ``messages_key`` (TRL's and verl's
    ``messages`` layout: the context up to the first assistant message is the
    prompt, every assistant turn after it is trained), or a prompt in
    ``data.prompt_key`` with its response in ``response_key`` (TRL's
    ``prompt``/``completion`` layout; the default task's ``prompt``/``answer``).
    """

    advantage_estimator: str | None = help_field(
        "SFT estimates no advantages; leave null.",
        default=None,
    )
    policy_loss: str = help_field(
        "The loss of the given responses' tokens: nll (negative log-likelihood, aggregated by "
        "loss_agg_mode).",
        default="nll",
    )
    messages_key: str = help_field(
        "Column holding a whole conversation (list of messages); rows without it use "
        "data.prompt_key and response_key.",
        default="messages",
    )
    response_key: str = help_field(
        "Column holding the response to data.prompt_key's prompt (a string or assistant "
        "messages), for rows without messages_key.",
        default="completion",
    )
    tools_key: str = help_field(
        "Column holding a row's tool schemas (OpenAI form, a list or its JSON string), given "
        "to the chat template as its tools; rows without it get none.",
        default="tools",
    )
    max_length: int | None = help_field(
        "Rows whose prompt plus response is longer than this many tokens are dropped from a "
        "step (counted in sft/dropped_rows); null keeps every row.",
        default=None,
        validator=attrs.validators.optional(attrs.validators.ge(2)),
    )
    append_eos: bool = help_field(
        "End every response with the tokenizer's EOS token (trained), so the model learns to "
        "stop where a rollout stops.",
        default=True,
    )
