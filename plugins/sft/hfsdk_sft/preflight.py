"""``sft_rows``: every training (and validation) row tokenized before an SFT run starts."""

from __future__ import annotations

from typing import Any

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
    from hfsdk_supervised_data.row_checks import check_fits, check_some_fit, prepared_rows

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
    training = [x for x in lengths if x[1].startswith("row ")]
    check_some_fit(training, cfg.max_length, "training rows", "trained")
