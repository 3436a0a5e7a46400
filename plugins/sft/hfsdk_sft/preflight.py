"""``sft_rows``: every training (and validation) row tokenized before an SFT run starts."""

from __future__ import annotations

from typing import Any

from hfsdk import HfsdkError
from hfsdk_sft.sft_config import SFTConfig


def check_sft_rows(config: Any, spec: Any, prepared: Any) -> None:
    """Refuse a run one of whose rows a step would refuse (no assistant turn, say), whose
    longest kept row outgrows the model's positions, or whose training rows are all longer
    than ``algorithm.max_length``."""
    del spec
    cfg = config.algorithm
    if not isinstance(cfg, SFTConfig):
        return
    from hfsdk_datasets import resolve_use_template
    from hfsdk_sft.targets import row_sequence
    from hfsdk_supervised_data.row_checks import check_fits, prepared_rows

    tokenizer = prepared.tokenizer
    use_template = resolve_use_template(tokenizer, config.data.apply_chat_template)
    responses = {cfg.messages_key, cfg.response_key}
    lengths: list[tuple[int, str]] = []
    for where, row in prepared_rows(prepared, lambda row: bool(responses & set(row))):
        sequence = row_sequence(
            row, tokenizer, config=cfg, prompt_key=config.data.prompt_key,
            use_template=use_template, where=where,
        )  # fmt: skip
        lengths.append((len(sequence.prompt_ids) + len(sequence.response_ids), where))
    check_fits(max(lengths, key=lambda item: item[0], default=None), prepared, cfg.max_length)
    # A step drops over-long rows and draws others: that cannot help when none would be left.
    check_some_row_fits([x for x in lengths if x[1].startswith("row ")], cfg.max_length)


def check_some_row_fits(lengths: list[tuple[int, str]], max_length: int | None) -> None:
    """Refuse when every training row (``(tokens, where)`` each) is longer than ``max_length``."""
    if max_length is None or not lengths or any(tokens <= max_length for tokens, _ in lengths):
        return
    tokens, where = lengths[0]
    shortest = min(length for length, _ in lengths)
    raise HfsdkError(
        f"all {len(lengths)} training rows are longer than algorithm.max_length={max_length} "
        f"tokens (first: {where}, {tokens} tokens), so none could be trained; raise "
        f"algorithm.max_length to at least {shortest}"
    )
