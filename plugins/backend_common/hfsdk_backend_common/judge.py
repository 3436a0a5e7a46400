"""The ``llm_judge`` reward: a language model reads a filled-in template and writes a verdict.

The judge is a local HF model directory (``model_path``; unset: the built-in
default task's model). For every sample the template is filled with
``{prompt}`` and ``{response}`` (and any dataset column by name), the judge
generates greedily through a registered rollout backend (``backend``; unset:
the one an installed plugin declares default; the rollout contract lets any
backend serve a model that is not being trained), and ``score_pattern``'s
first group that reads as a number is the score, clamped to ``[min_score,
max_score]``; a match that is not a number (``...`` for ``([0-9.]+)``, ``nan``)
is passed over like text that does not match. A verdict without such a match
scores ``no_score`` and counts in the ``parsed`` metric (the share of verdicts
that held a score). A template field other than ``prompt`` and ``response`` is a
column: one a rollout adds (``agent_tool_calls`` and the agent loop's other columns,
:data:`ROLLOUT_COLUMNS`) or a dataset column, so a run whose dataset lacks it is
refused before it starts; a
template that cannot be filled (a stray ``}``, ``{"score": N}`` meant literally) is
refused when its configuration is built: braces meant literally are written ``{{``
and ``}}``.

A filled-in template may be as long as the judge model reads: its positions
(``max_position_embeddings`` or the like in ``config.json``) less
``max_verdict_tokens``; a longer one is refused before it is generated.

The judge runs on the controller, in the process that computes every reward
function, and is built once per configuration. It lives with the backends
(it drives a rollout backend) and is registered by this package's plugin.
"""

from __future__ import annotations

import contextlib
import functools
import math
import re
import string
from collections.abc import Iterator, Sequence
from typing import Any

import attrs

from hfsdk import (
    INTERNAL_COLUMNS,
    SEGMENT_INDEX,
    TRAJECTORY_ID,
    HfsdkError,
    absolute_if_exists,
    help_field,
)


def _regex(_instance: object, attribute: attrs.Attribute, value: str) -> None:
    try:
        compiled = re.compile(value)
    except re.error as exc:
        raise ValueError(
            f"{attribute.name}={value!r} is not a valid regular expression: {exc}"
        ) from None
    if compiled.groups < 1:
        raise ValueError(f"{attribute.name}={value!r} needs a group around the score, e.g. (\\d+)")


FILLED_FIELDS = ("prompt", "response")
"""Template fields ``llm_judge`` fills itself; every other field is a column."""

AGENT_COLUMNS = ("agent_trajectory", "agent_turns", "agent_tool_calls", "agent_tool_errors")
"""Columns the agent loop adds to every rollout row (docs/agents.md); hfsdk states no
constant for them (``hfsdk_agents.runner`` writes them by name)."""

ROLLOUT_COLUMNS = frozenset({*INTERNAL_COLUMNS, SEGMENT_INDEX, TRAJECTORY_ID, *AGENT_COLUMNS})
"""Columns a rollout adds to the dataset's: a template may read them, and a dataset need
not hold them."""

_LITERAL_BRACES = (
    'write {{ and }} for literal braces (e.g. {{"score": N}}) and name a field only as '
    "{prompt}, {response} or {COLUMN}"
)


def _field_roots(template: str) -> list[str]:
    """The root name of every replacement field of ``template``, nested ones in a format
    spec included, in order; a ``ValueError`` says why the template cannot be filled."""
    roots = []
    for _text, field, spec, conversion in string.Formatter().parse(template):
        if field is None:  # text after the last field
            continue
        if conversion not in (None, "r", "s", "a"):
            raise ValueError(f"unknown conversion !{conversion} in {{{field}!{conversion}}}")
        # {a.b} and {a[0]} read the column a.
        root = re.split(r"[.\[]", field, maxsplit=1)[0]
        # Positional ({} or {0}) and quoted names are never a column: they are braces meant
        # literally, such as a JSON example ({"score": N}). Any other name is a column, one
        # with a space ({ground truth}) too: str.format fills it by that name.
        if not root or root.isdigit() or re.search(r"['\"]", root):
            raise ValueError(f"{{{field}}} is not a field name")
        roots.append(root)
        if spec:
            roots.extend(_field_roots(spec))
    return roots


def template_columns(template: str) -> tuple[str, ...]:
    """The dataset columns ``template`` reads: its fields other than prompt, response and
    the columns a rollout adds, once each, in order (registered as ``columns=``, so a run
    refuses a dataset without one before it starts)."""
    roots = dict.fromkeys(_field_roots(template))
    # A rollout's columns are no dataset's: the preflight sees only the dataset's, and
    # refused every agent run whose judge read the agent's tool calls. A name of the agent
    # loop's prefix is its too, so a column it adds later is not refused either; a run that
    # lacks one at scoring time is refused there, naming it.
    return tuple(
        name
        for name in roots
        if name not in FILLED_FIELDS
        and name not in ROLLOUT_COLUMNS
        and not name.startswith("agent_")
    )


def _template(_instance: object, attribute: attrs.Attribute, value: str) -> None:
    try:
        _field_roots(value)
    except ValueError as exc:
        raise ValueError(
            f"{attribute.name}={value!r} cannot be filled ({exc}); {_LITERAL_BRACES}"
        ) from None


@attrs.frozen(kw_only=True)
class JudgeConfig:
    """Settings of ``llm_judge``: the judge model, its template, how a score is read."""

    model_path: str | None = help_field(
        "Local HF model directory of the judge; null: the default task's model.",
        default=None,
        converter=absolute_if_exists,
    )
    template: str = help_field(
        "What the judge reads: {prompt}, {response} and dataset columns by {name}.",
        default="{prompt} {response}\nScore (0-9):",
        validator=_template,
    )
    score_pattern: str = help_field(
        "Regex whose first group in the verdict is the score (the first match that is a number).",
        default=r"(-?\d+(?:\.\d+)?)",
        validator=_regex,
    )
    # The default scale matches the default template's "0-9", so a grade is not cut at 1.
    min_score: float = help_field("Scores below are raised to this.", default=0.0)
    max_score: float = help_field("Scores above are lowered to this.", default=9.0)
    no_score: float = help_field("The score of a verdict without a match.", default=0.0)
    max_verdict_tokens: int = help_field(
        "Longest verdict in tokens.", default=8, validator=attrs.validators.ge(1)
    )
    backend: str | None = help_field(
        "Rollout backend that generates the verdicts; null: the default one.", default=None
    )
    device: str = help_field("cpu, cuda or auto.", default="cpu")
    dtype: str = help_field(
        "float32 or bfloat16.",
        default="float32",
        validator=attrs.validators.in_(("float32", "bfloat16")),
    )

    @max_score.validator
    def _max_not_below_min(self, _attribute: attrs.Attribute, value: float) -> None:
        if value < self.min_score:
            raise ValueError(
                f"max_score={value} is below min_score={self.min_score}; "
                "expected min_score <= max_score"
            )


class LocalJudgeModel:
    """A frozen HF model in this process, offered to a rollout backend as an ``ActorSource``.

    It never changes (``weights_version`` stays 0), generates on its own module
    (``live_hf_module``) and has one data-parallel rank.
    """

    def __init__(self, config: JudgeConfig) -> None:
        import torch
        from transformers import AutoModelForCausalLM, GenerationConfig

        from hfsdk import DataParallelInfo, load_tokenizer

        path = config.model_path
        if path is None:
            from hfsdk import default_model_dir

            path = str(default_model_dir())
        self.model_path = path
        self.tokenizer = load_tokenizer(path)
        # The widest filled-in template the judge reads, and the positions it comes from
        # (checked before the weights load).
        self.positions, self.positions_key = self._positions()
        self.max_prompt_tokens = self.positions - config.max_verdict_tokens
        if self.max_prompt_tokens < 1:
            raise HfsdkError(
                f"llm_judge: max_verdict_tokens={config.max_verdict_tokens} leaves no room for "
                f"a template in the {self.positions} positions ({self.positions_key}) of the "
                f"judge model {path!r}; lower max_verdict_tokens below {self.positions}"
            )
        wants_cuda = config.device == "cuda" or (
            config.device == "auto" and torch.cuda.is_available()
        )
        self.device = torch.device("cuda" if wants_cuda else "cpu")
        self.compute_dtype = getattr(torch, config.dtype)
        try:
            model = AutoModelForCausalLM.from_pretrained(path, dtype=self.compute_dtype)
        except (OSError, ValueError) as exc:
            raise HfsdkError(
                f"llm_judge: the judge model {path!r} could not be loaded ({exc}); set "
                "model_path to a local HF model directory"
            ) from exc
        self.module = model.to(self.device).eval()
        self.hf_config = model.config
        try:
            eos = GenerationConfig.from_pretrained(path).eos_token_id
        except OSError:
            eos = None
        self.generation_eos_ids = [eos] if isinstance(eos, int) else list(eos or [])
        self.dp = DataParallelInfo()
        self.weights_version = 0
        self.last_weights_metrics: dict[str, float] = {}
        self.weight_probes: dict[str, Any] = {}  # sends only what it holds

    def _positions(self) -> tuple[int, str]:
        """The judge model's positions and where they were read."""
        from hfsdk_backend_common.positions_check import model_positions

        found = model_positions(self.model_path)
        if found is None:
            # No positions in config.json: the tokenizer's own limit, when it states one
            # (transformers' "unset" is a huge sentinel).
            limit = getattr(self.tokenizer, "model_max_length", None)
            if not isinstance(limit, int) or not 0 < limit < 10**9:
                raise HfsdkError(
                    f"llm_judge: the judge model {self.model_path!r} states no positions "
                    "(max_position_embeddings in config.json) nor a tokenizer "
                    "model_max_length, so how long a template it reads is unknown; use a "
                    "judge model whose config.json states max_position_embeddings"
                )
            return limit, "the tokenizer's model_max_length"
        return found

    def hf_weights(self) -> Iterator[tuple[str, Any]]:
        """The judge's weights by HF name (it never trains)."""
        for name, parameter in self.module.named_parameters():
            yield name, parameter.detach()

    @contextlib.contextmanager
    def live_hf_module(self, *, gather: bool = False) -> Iterator[Any]:
        """The judge's own module: it generates as it is."""
        import torch

        with torch.no_grad():
            yield self.module

    def generation_shards(self, config: Any) -> None:
        """No resharding: the judge is one unsharded model."""
        return None


@functools.cache
def _judge(config: JudgeConfig) -> tuple[LocalJudgeModel, Any]:
    """The judge model and its rollout, built once per configuration."""
    from hfsdk import build_rollout, default_rollout_backend, get_registry

    registry = get_registry("rollout_backends")
    name = config.backend or default_rollout_backend(registry)
    entry = registry[name]
    if entry.config_cls is None:
        raise HfsdkError(
            f"llm_judge: rollout backend {name!r} registers no config class; "
            "choose another backend (hfsdk list rollout-backends)"
        )
    source = LocalJudgeModel(config)
    # The rollout's prompt limit defaults to a run's (64 tokens); the judge's templates are
    # bounded by the judge model instead (llm_judge refuses a longer one by name).
    rollout_config = entry.config_cls(
        backend=name,
        max_prompt_length=source.max_prompt_tokens,
        max_response_length=config.max_verdict_tokens,
        temperature=0.0,
    )
    return source, build_rollout(rollout_config, source)


def _prompts(texts: Sequence[str], tokenizer: Any) -> Any:
    import torch

    from hfsdk import Batch

    encoded = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    width = max(len(ids) for ids in encoded)
    input_ids = torch.full((len(encoded), width), tokenizer.pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(encoded), width), dtype=torch.long)
    for row, ids in enumerate(encoded):
        input_ids[row, width - len(ids) :] = torch.tensor(ids, dtype=torch.long)
        mask[row, width - len(ids) :] = 1
    return Batch.from_dict(tensors={"input_ids": input_ids, "attention_mask": mask})


def llm_judge(
    prompts: Sequence[str],
    responses: Sequence[str],
    *,
    config: JudgeConfig | None = None,
    **columns: Sequence[Any],
) -> list[dict[str, float]]:
    """Scores read from the judge's verdict on each (prompt, response)."""
    config = config or JudgeConfig()
    texts = []
    for i, (prompt, response) in enumerate(zip(prompts, responses, strict=True)):
        # The prompt and response passed in win over dataset columns of the same names.
        fields = {**{k: v[i] for k, v in columns.items()}, "prompt": prompt, "response": response}
        try:
            texts.append(config.template.format(**fields))
        except (KeyError, IndexError) as exc:
            raise HfsdkError(
                f"llm_judge: the template names {exc} that is neither prompt, response nor a "
                f"dataset column (columns: {sorted(columns) or 'none'})"
            ) from None
    if not texts:
        return []
    source, rollout = _judge(config)
    batch = _prompts(texts, source.tokenizer)
    _check_width(batch["input_ids"].shape[1], source, config)
    batch.meta.update(greedy=True, n=1)
    verdicts = list(rollout.generate_sequences(batch)["response_text"])
    pattern = re.compile(config.score_pattern)
    rows = []
    for verdict in verdicts:
        value = _score(pattern, verdict)
        if value is None:
            rows.append({"score": config.no_score, "parsed": 0.0})
            continue
        rows.append({"score": min(max(value, config.min_score), config.max_score), "parsed": 1.0})
    return rows


def _check_width(width: int, source: Any, config: JudgeConfig) -> None:
    """Refuse, by the judge's settings, a filled-in template longer than the judge reads."""
    # A source that states no limit (a stand-in) leaves the check to its rollout.
    limit = getattr(source, "max_prompt_tokens", None)
    if limit is None or width <= limit:
        return
    raise HfsdkError(
        f"llm_judge: a filled-in template is {width} tokens but the judge model "
        f"{source.model_path!r} reads at most {limit} tokens (its {source.positions} positions, "
        f"{source.positions_key}, less max_verdict_tokens={config.max_verdict_tokens}); shorten "
        "the template, the prompts or the responses, or use a judge with more positions"
    )


def _score(pattern: re.Pattern[str], verdict: str) -> float | None:
    """The first group, over the matches in order, that reads as a number; ``None`` if none.

    A match that is not a number counts as no match (a raw ``ValueError`` stopped the
    reward computation); NaN is not a score (it would survive the clamp).
    """
    for match in pattern.finditer(verdict):
        group = match.group(1)
        if group is None:  # an optional group that took no part in the match
            continue
        try:
            value = float(group)
        except ValueError:
            continue
        if not math.isnan(value):
            return value
    return None
