"""``hfsdk data inspect``: what a run would make of a dataset, without starting Ray.

Loads the files the way a run does (same prompt rendering, same length filter,
same reward columns) and reports rows, the prompt key, the first rendered
prompt with its token count, the columns a reward function sees and the rows
dropped for length; for each configured reward function its style and the
columns it reads, and what the run's own check before it starts
(``hfsdk_rewards.signature_problem``) would refuse. Given a run config with an
algorithm (:func:`inspect_run`), the files, tokenizer and reward functions are
the ones the run resolves: the default task's where the config names none.
"""

from __future__ import annotations

import inspect
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from hfsdk import (
    INTERNAL_COLUMNS,
    DataConfig,
    HfsdkError,
    make_converter,
    structure,
)
from hfsdk_datasets import reward_column_names
from hfsdk_rewards import load_reward_functions, signature_problem


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
    described: tuple[str, ...] = ()
    """Lines the registered ``prompt_describers`` add (e.g. image-token counts)."""

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
        lines.extend(self.described)
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
    if call.needs:  # what a registered function says it reads (e.g. exact_match's answer)
        reads: tuple[str, ...] = tuple(call.needs)
    elif call.style == "openrlhf" and label_key:
        reads = (label_key,)
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
    # The run's own check before it starts: what it refuses, this reports.
    problem = signature_problem(call, [name for name in rows[0] if name not in INTERNAL_COLUMNS])
    if problem:
        missing.append(f"A RUN STOPS BEFORE IT STARTS: {problem}")
    return RewardFunctionView(
        label=call.label, style=call.style, reads=tuple(reads), missing=tuple(missing)
    )


def inspect_dataset(
    files: Sequence[str],
    tokenizer: Any,
    data: Mapping[str, Any] | DataConfig | None = None,
    reward: Any = None,
    model_path: str | None = None,
    tools: Sequence[Mapping[str, Any]] = (),
    source: str | None = None,
) -> DatasetReport:
    """Load ``files`` as a run would and describe them.

    ``data`` is a ``data`` config section, raw or resolved (prompt key, length
    limit, chat template switch); ``reward`` a ``reward`` section (or the list of
    its functions) whose functions are loaded; ``model_path`` the run's model directory, for
    the ``prompt_describers`` that need more than the tokenizer (an image processor);
    ``tools`` the JSON schemas the run's chat template renders into every prompt
    (``hfsdk.run_tool_schemas``), which count toward its length and unknown tokens;
    ``source`` what an error for a missing file names (default: ``data.train_files``).
    """
    from hfsdk_datasets import (
        PromptLoader,
        load_prompt_dataset,
        plain_rendering_cause,
        plain_rendering_reported,
        unknown_token_shares,
    )

    plain_rendering_reported(tokenizer)  # the report's "rendering:" line says it once
    if isinstance(data, DataConfig):
        config = data
    else:
        raw = {k: v for k, v in dict(data or {}).items() if k not in ("train_files", "val_files")}
        config = structure(make_converter(), raw, DataConfig, path="data")
    dataset = load_prompt_dataset(files, config.prompt_key, source=source)
    data_config = attrs.evolve(config, shuffle=False)
    loader = PromptLoader(dataset, tokenizer, data_config, seed=0, tools=tuple(tools))
    first = loader.rows[0]
    shares = unknown_token_shares(tokenizer, loader.rows, loader.token_ids, config.prompt_key)
    views: list[RewardFunctionView] = []
    functions = (reward or {}).get("functions") if isinstance(reward, Mapping) else reward
    if functions:
        for weighted in load_reward_functions(functions):
            views.append(_function_view(weighted.call, loader.rows))
    if loader.use_template:
        template = "the tokenizer's chat template (add_generation_prompt=True)"
    else:
        # By its cause: a tokenizer with a template gets here only when the run turns it off.
        template = f"plain ({plain_rendering_cause(tokenizer)}; see docs/migrating.md)"
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
        described=tuple(_described(loader.rows, tokenizer, model_path)),
    )


def _described(
    rows: Sequence[Mapping[str, Any]], tokenizer: Any, model_path: str | None
) -> list[str]:
    """Every registered prompt describer's lines, in name order."""
    from hfsdk import get_registry

    lines: list[str] = []
    for name in get_registry("prompt_describers"):
        lines.extend(get_registry("prompt_describers")[name].impl(rows, tokenizer, model_path))
    return lines


def inspect_run(
    algo: str | None,
    config_file: str | None,
    overrides: Sequence[str],
    files: Sequence[str] = (),
) -> DatasetReport:
    """Describe the data a run of this config would train on, resolved as the run does.

    ``files`` replace the run's training files; without them (and without
    ``data.train_files``) they are the default task's, as are the tokenizer and
    the reward functions when the config names none (``hfsdk.run_assets``,
    ``hfsdk.run_signals``: the run's own resolution), and the prompts announce the
    run's tools (``hfsdk.run_tool_schemas``) as its chat template renders them.
    """
    from hfsdk import (
        load_run_config,
        load_tokenizer,
        run_assets,
        run_signals,
        run_spec,
        run_tool_schemas,
    )

    config = load_run_config(algo, config_file, list(overrides))
    spec = run_spec(config)
    assets = run_assets(config, spec)
    functions = [
        function
        for signal in run_signals(config, spec, assets).values()
        for function in signal.functions
    ]
    tokenizer = load_tokenizer(str(assets.tokenizer_path))
    paths = tuple(files) or tuple(str(path) for path in assets.train_files)
    return inspect_dataset(
        paths,
        tokenizer,
        config.data,
        functions or None,
        model_path=assets.model_path,
        tools=run_tool_schemas(config),
        source=FILE_ARGUMENTS if files else None,
    )


FILE_ARGUMENTS = "the FILE arguments"
"""What a missing file's error names when the files came from ``hfsdk data inspect FILE...``."""


_OVERRIDE_KEY = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
"""The part before ``=`` of a ``key.sub=value`` override (a path's has ``/`` or ``-``)."""


def split_file_arguments(arguments: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``hfsdk data inspect``'s positional arguments as (files, ``key.sub=value`` overrides).

    ``hfsdk run`` takes bare overrides, so users write them here too: an argument whose
    part before ``=`` is a dotted config key and which names no existing path is an
    override; any other (``a=b.jsonl`` that exists, ``runs/lr=1e-6/d.jsonl``) is a file.
    """
    files: list[str] = []
    overrides: list[str] = []
    for argument in arguments:
        key, sep, _ = argument.partition("=")
        if sep and _OVERRIDE_KEY.fullmatch(key.strip()) and not os.path.exists(argument):
            overrides.append(argument)
        else:
            files.append(argument)
    return tuple(files), tuple(overrides)


def check_files(files: Sequence[str]) -> tuple[str, ...]:
    """``files`` as a tuple; none given is a one-line error."""
    if not files:
        raise HfsdkError(
            "no dataset files given; pass FILE arguments, a --config with data.train_files, or "
            "a run config with an algorithm (--algo, or algo: in the file) to inspect the data "
            "its run resolves (the default task's when it names none)"
        )
    return tuple(files)
