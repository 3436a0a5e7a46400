"""``rm_pairs``: every training (and validation) pair tokenized before a reward-model run."""

from __future__ import annotations

from typing import Any

from hfsdk_reward_model.rm_config import RewardModelConfig


def check_rm_pairs(config: Any, spec: Any, prepared: Any) -> None:
    """Refuse a reward-model run one of whose pairs a step would refuse (an empty response)
    or drop (longer than ``algorithm.max_length``)."""
    from hfsdk_datasets import resolve_use_template
    from hfsdk_reward_model.rm_algorithm import pair_columns
    from hfsdk_supervised_data import check_preference_rows

    del spec
    if not isinstance(config.algorithm, RewardModelConfig):
        return
    tokenizer = prepared.tokenizer
    check_preference_rows(
        prepared,
        tokenizer,
        use_template=resolve_use_template(tokenizer, config.data.apply_chat_template),
        columns=pair_columns(config.algorithm, config.data.prompt_key),
        max_length=config.algorithm.max_length,
        validation_needs_pairs=True,  # validation_metrics scores every held-out row as a pair
        refuse_longer=True,  # a step drops over-long pairs and draws others: none may be left
    )
