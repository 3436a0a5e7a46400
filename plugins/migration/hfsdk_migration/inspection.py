"""``hfsdk data inspect``: what a run would make of a dataset, without starting Ray.

Loads the files the way a run does (same prompt rendering, same length filter,
same reward columns) and reports rows, the prompt key, the first rendered
prompt with its token count, the columns a reward function sees and the rows
dropped for length; for each configured reward function its style and the
columns it reads.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from hfsdk.core.config.converter import make_converter, structure
from hfsdk.core.data.columns import reward_column_names
from hfsdk.core.data.data_config import DataConfig
from hfsdk.core.errors import HfsdkError


@attrs.frozen(kw_only=True)
class RewardFunctionView:
    """One configured reward function: its label, style and the columns it reads."""

    label: str
    style: str
    reads: tuple[str, ...]
    missing: tuple[str, ...] = ()
    """Columns it needs that the dataset lacks (or holds empty in some rows)."""


@attrs.frozen(kw_only=True)
class DatasetReport:
    """What ``hfsdk data inspect`` prints."""

    files: tuple[str, ...]
    rows: int
    kept: int
    dropped: int
    max_prompt_length: int
    prompt_key: str
    chat_prompts: bool
    template: str
    first_prompt: str
    first_prompt_tokens: int
    reward_columns: tuple[str, ...]
    functions: tuple[RewardFunctionView, ...] = ()
    unknown_tokens: tuple[tuple[str, float], ...] = ()
    """(column, share of its tokens the tokenizer cannot read), for the text columns."""
    unknown_limit: float = 0.05

    def format(self) -> str:
        """The report as aligned text lines."""
        kind = "chat messages" if self.chat_prompts else "plain text"
        lines = [
            f"files:            {', '.join(self.files)}",
            f"rows:             {self.rows}",
            f"prompt key:       {self.prompt_key} ({kind})",
            f"rendering:        {self.template}",
            f"first prompt:     {self.first_prompt!r} ({self.first_prompt_tokens} tokens)",
            f"reward columns:   {', '.join(self.reward_columns)}",
            f"dropped (length): {self.dropped} of {self.rows} rows longer than "
            f"data.max_prompt_length={self.max_prompt_length} tokens",
        ]
        if self.unknown_tokens:
            shares = ", ".join(f"{column} {share:.1%}" for column, share in self.unknown_tokens)
            lines.append(f"unknown tokens:   {shares}")
            prompt_share = dict(self.unknown_tokens).get(self.prompt_key, 0.0)
            if prompt_share > self.unknown_limit:
                lines.append(
                    f"                  the prompts exceed data.max_unknown_token_share="
                    f"{self.unknown_limit}: a run stops; use a model whose tokenizer reads this "
                    "text (actor.model_path)"
                )
        for view in self.functions:
            line = f"reward function:  {view.label} (style {view.style}) reads "
            line += ", ".join(view.reads) or "no columns"
            if view.missing:
                line += f"; MISSING: {', '.join(view.missing)}"
            lines.append(line)
        return "\n".join(lines)


_STYLE_READS = {
    "verl": ("data_source", "ground_truth", "extra_info"),
    "openrlhf": ("label|ground_truth",),
}


def _function_view(call: Any, rows: Sequence[Mapping[str, Any]]) -> RewardFunctionView:
    columns = reward_column_names(rows[0])
    label_key = getattr(call.fn, "label_key", None)
    if call.style == "openrlhf" and label_key:
        reads: tuple[str, ...] = (label_key,)
    elif call.style in _STYLE_READS:
        reads = _STYLE_READS[call.style]
    else:
        parameters = inspect.signature(call.fn).parameters
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
            reads = tuple(columns)
        else:
            reads = tuple(c for c in columns if c in parameters)
    missing: list[str] = []
    if call.style == "verl":
        empty = sum(1 for row in rows if row.get("ground_truth") is None)
        if empty:
            missing.append(f"ground_truth in {empty} of {len(rows)} rows")
    if call.style == "openrlhf" and label_key and label_key not in columns:
        missing.append(f"the label column {label_key!r}")
    elif call.style == "openrlhf" and not ({"label", "ground_truth"} & set(columns)):
        missing.append("a label column (label or ground_truth; or set kwargs.label_key)")
    from hfsdk.core.data.columns import INTERNAL_COLUMNS
    from hfsdk.core.rewards.signatures import signature_problem

    problem = signature_problem(call, [name for name in rows[0] if name not in INTERNAL_COLUMNS])
    if problem:
        missing.append(f"CANNOT BE CALLED: {problem}")
    return RewardFunctionView(
        label=call.label, style=call.style, reads=tuple(reads), missing=tuple(missing)
    )


def inspect_dataset(
    files: Sequence[str],
    tokenizer: Any,
    data: Mapping[str, Any] | None = None,
    reward: Any = None,
) -> DatasetReport:
    """Load ``files`` as a run would and describe them.

    ``data`` is a raw ``data`` config section (prompt key, length limit, chat
    template switch); ``reward`` a ``reward`` section whose functions are loaded.
    """
    from hfsdk.core.data.prompt_dataset import PromptLoader, load_prompt_dataset

    section = {k: v for k, v in dict(data or {}).items() if k not in ("train_files", "val_files")}
    config: DataConfig = structure(make_converter(), section, DataConfig, path="data")
    dataset = load_prompt_dataset(files, config.prompt_key)
    loader = PromptLoader(dataset, tokenizer, attrs.evolve(config, shuffle=False), seed=0)
    first = loader.rows[0]
    from hfsdk.core.data.unknown_tokens import unknown_token_shares

    shares = unknown_token_shares(tokenizer, loader.rows, loader.token_ids, config.prompt_key)
    views: list[RewardFunctionView] = []
    functions = (reward or {}).get("functions") if isinstance(reward, Mapping) else None
    if functions:
        from hfsdk.core.rewards import load_reward_functions

        for weighted in load_reward_functions(functions):
            views.append(_function_view(weighted.call, loader.rows))
    if loader.use_template:
        template = "the tokenizer's chat template (add_generation_prompt=True)"
    else:
        template = "plain (the tokenizer has no chat template; see docs/migrating.md)"
    return DatasetReport(
        files=tuple(files),
        rows=len(dataset),
        kept=len(loader),
        dropped=loader.dropped,
        max_prompt_length=config.max_prompt_length,
        prompt_key=config.prompt_key,
        chat_prompts=first["prompt_messages"] is not None,
        template=template,
        first_prompt=first["rendered_prompt"],
        first_prompt_tokens=len(loader.token_ids[0]),
        reward_columns=tuple(reward_column_names(first)),
        functions=tuple(views),
        unknown_tokens=tuple(shares.items()),
        unknown_limit=config.max_unknown_token_share,
    )


def check_files(files: Sequence[str]) -> tuple[str, ...]:
    """``files`` as a tuple; none given is a one-line error."""
    if not files:
        raise HfsdkError(
            "no dataset files given; pass FILE arguments or a --config with data.train_files"
        )
    return tuple(files)
