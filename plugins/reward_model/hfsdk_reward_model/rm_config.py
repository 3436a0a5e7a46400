"""Configuration of reward/cost model training (``--algo reward_model``'s ``algorithm``)."""

from __future__ import annotations

from typing import Literal

import attrs

from hfsdk import TrainerAlgorithmConfig, help_field


@attrs.frozen(kw_only=True)
class RewardModelConfig(TrainerAlgorithmConfig):
    """Bradley-Terry on preference pairs: the preferred response should score higher.

    No RL settings (no policy is sampled or updated): a
    :class:`hfsdk.TrainerAlgorithmConfig`, not an ``AlgorithmConfig``.
    """

    margin: float = help_field(
        "Fixed margin m of −log σ(r_chosen − r_rejected − m); 0 is plain Bradley-Terry.",
        default=0.0,
    )
    center_coef: float = help_field(
        "Reward centring: adds center_coef·(r_chosen + r_rejected)² so scores stay near 0 "
        "(Eisenstein et al., 2023; TRL's center_rewards_coefficient); 0 turns it off.",
        default=0.0,
        validator=attrs.validators.ge(0.0),
    )
    higher: Literal["chosen", "rejected"] = help_field(
        "Which response of a pair should score higher: chosen (a reward model) or rejected "
        "(a cost model trained on data whose chosen response is the safer one).",
        default="chosen",
        validator=attrs.validators.in_(("chosen", "rejected")),
    )
    chosen_key: str = help_field(
        "Column of the preferred response (text, or chat messages); the prompt is the "
        "data.prompt_key column, or the shared beginning of both when the data has none.",
        default="chosen",
    )
    rejected_key: str = help_field(
        "Column of the other response (the same form as chosen_key's).", default="rejected"
    )
    tools_key: str = help_field(
        "Column holding a row's tool schemas (OpenAI form, a list or its JSON string), given "
        "to the chat template of both responses as their tools (as SFT's tools_key); rows "
        "without it get none.",
        default="tools",
    )
    max_length: int = help_field(
        "Pairs whose prompt plus longer response exceed this many tokens are dropped (with a "
        "warning; a step left with none draws the next rows), and data whose every training "
        "or every validation pair is longer is refused before the run.",
        default=1024,
        validator=attrs.validators.ge(2),
    )
