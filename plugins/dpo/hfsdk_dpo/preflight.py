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
        refuse_longer=_long_pairs_that_could_fill_a_step(config.data.batch_size, prepared),
    )


def _long_pairs_that_could_fill_a_step(batch_size: int, prepared: Any) -> int:
    """How many over-long pairs could make up a whole step (which then stops the run); fewer
    leave every step a pair to train on, the rest dropped (``dpo/dropped_pairs``).

    A step straddling two epochs may draw a row twice, so half a step's pairs can fill it;
    with fewer rows than a step, a step holds every row, so only all of them can.
    """
    rows = len(prepared.loader.rows)
    return max(1, min((batch_size + 1) // 2, rows))
