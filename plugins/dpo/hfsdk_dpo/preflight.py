"""``dpo_pairs``: every training (and validation) pair tokenized before a DPO run starts."""

from __future__ import annotations

from typing import Any

from hfsdk_dpo.dpo_config import DPOConfig


def check_dpo_pairs(config: Any, spec: Any, prepared: Any) -> None:
    """Refuse a run one of whose pairs a step would refuse (an empty rejected response, say)."""
    del spec
    cfg = config.algorithm
    if not isinstance(cfg, DPOConfig):
        return
    from hfsdk_datasets import resolve_use_template
    from hfsdk_dpo.pairs import pair_columns
    from hfsdk_supervised_data import check_preference_rows

    tokenizer = prepared.tokenizer
    check_preference_rows(
        prepared,
        tokenizer,
        use_template=resolve_use_template(tokenizer, config.data.apply_chat_template),
        columns=pair_columns(cfg, config.data.prompt_key),
        append_eos=cfg.append_eos,
        max_length=cfg.max_length,
        refuse_longer=True,  # a step drops over-long pairs and draws others: none may be left
    )
