"""Preference pairs: a prompt with a chosen and a rejected response, as the tensors DPO and
Bradley-Terry reward models train on.

Accepted row layouts (TRL's and verl's preference datasets):

- **explicit prompt**: ``prompt`` plus ``chosen`` and ``rejected``; each a
  string, or chat messages (the prompt's context messages; each response's
  assistant turn(s)). Responses given as whole conversations that start with the
  prompt (as a user message, or the prompt's messages: HuggingFaceH4/ultrafeedback_binarized)
  have that start dropped, as TRL's ``maybe_extract_prompt`` does; ones that start
  with another conversation (a user or system message) are refused;
- **implicit prompt**: only ``chosen`` and ``rejected``, each a whole
  conversation (messages) or a whole text; the prompt is their shared
  beginning — the leading messages both share, or (text) the common prefix cut
  back to the last whitespace, which starts the responses, as TRL's
  ``extract_prompt`` does.

Each response is tokenized after the prompt with the run's tokenizer (and its
chat template when the run uses one) by
:func:`hfsdk_supervised_data.conversation.tokenize_supervised`, so the prompt has the
ids it has in an RL run and the response mask is 1 on assistant tokens only.

:func:`collate_preference_pairs` returns one :class:`hfsdk.Batch`
of ``2·N`` rows in the workers' sequence layout (``prompts``, ``responses``,
``input_ids``, ``attention_mask``, ``position_ids``, ``response_mask``),
**interleaved**: row ``2i`` is pair ``i``'s chosen response, row ``2i + 1`` its
rejected one. A contiguous split into even-sized parts (data-parallel chunks,
micro-batches) therefore keeps every pair together. ``pair_index`` (2N,) and
``chosen`` (2N, 1 for chosen rows) say so explicitly; :func:`chosen_rows` and
:func:`rejected_rows` take the two halves of any per-row tensor.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from hfsdk import Batch, HfsdkError
from hfsdk_datasets import Messages, check_messages, check_tools
from hfsdk_supervised_data.conversation import (
    SupervisedSequence,
    as_messages,
    collate_supervised,
    tokenize_supervised,
)

logger = logging.getLogger(__name__)


@attrs.frozen(kw_only=True)
class PairColumns:
    """The dataset columns of a preference pair (TRL's names by default).

    ``prompt`` may be absent from a dataset (the implicit-prompt layout). ``tools``: the
    column of a row's tool schemas (OpenAI form, a list or its JSON string), given to the
    chat template of both responses as SFT's ``algorithm.tools_key`` is; a row without it,
    or ``""``, gets none.
    """

    prompt: str = "prompt"
    chosen: str = "chosen"
    rejected: str = "rejected"
    tools: str = "tools"

    @classmethod
    def read_by(
        cls, prompt_key: str, chosen: str, rejected: str, tools: str = "tools"
    ) -> PairColumns:
        """The columns a run reads with ``data.prompt_key``: none for the prompt when the key
        names a response column (the implicit-prompt layout: the prompt is what both
        responses begin with; naming the rejected one must not make it the prompt)."""
        prompt = "" if prompt_key in (chosen, rejected) else prompt_key
        return cls(prompt=prompt, chosen=chosen, rejected=rejected, tools=tools)


@attrs.frozen(kw_only=True)
class PreferencePair:
    """One tokenized pair: the same prompt ids in both sequences, two responses.

    ``row`` keeps the dataset row's other columns (``data_source``, ids, ...).
    """

    chosen: SupervisedSequence
    rejected: SupervisedSequence
    row: Mapping[str, Any] = attrs.field(factory=dict)

    def length(self) -> int:
        """Tokens of the longer of the two sequences (prompt included)."""
        prompt = len(self.chosen.prompt_ids)
        return prompt + max(len(self.chosen.response_ids), len(self.rejected.response_ids))


def _shared_messages(chosen: Messages, rejected: Messages) -> int:
    count = 0
    for a, b in zip(chosen, rejected, strict=False):
        if a != b:
            break
        count += 1
    return count


def _shared_text(chosen: str, rejected: str) -> int:
    count = 0
    for a, b in zip(chosen, rejected, strict=False):
        if a != b:
            break
        count += 1
    # Cut back to a word boundary so neither response starts inside a shared word; also when
    # one text is a prefix of the other ("A: 1" / "A: 12"), whose last shared word differs.
    while count > 0 and not chosen[count - 1].isspace():
        count -= 1
    # The whitespace before the word starts the responses, as in TRL's extract_prompt: a
    # byte-level BPE tokenizes " word" as one token, so prompt + response ids then match the
    # whole text's ids (and what the model generates), not a lone space and a bare word.
    while count > 0 and chosen[count - 1].isspace():
        count -= 1
    return count


CONVERSATION_STARTS = frozenset({"system", "user"})
"""Roles a response may not start with after a prompt: they begin a conversation of its own."""


def _starts_with(response: Messages, start: Messages) -> bool:
    if len(response) < len(start):
        return False
    for given, expected in zip(response, start, strict=False):
        if given.get("role") != expected.get("role"):
            return False
        # A text prompt and its user message may differ in surrounding whitespace only.
        if str(given.get("content", "")).strip() != str(expected.get("content", "")).strip():
            return False
        if {k: v for k, v in given.items() if k != "content"} != {
            k: v for k, v in expected.items() if k != "content"
        }:
            return False
    return True


def _after_prompt(
    prompt: str | Messages, response: Messages, name: str, columns: PairColumns, where: str
) -> Messages:
    """``response`` without the prompt it repeats (whole conversations as responses).

    HuggingFaceH4/ultrafeedback_binarized gives a text prompt and responses that start with
    it as a user message; trained as given, the model saw the question twice. A response
    that starts with another conversation is refused rather than trained on two prompts.
    """
    start = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
    if _starts_with(response, start):
        return response[len(start) :]
    if response[0]["role"] in CONVERSATION_STARTS:
        roles = [m["role"] for m in response]
        raise HfsdkError(
            f"{where}: {name!r} starts with a conversation (roles: {roles}) other than the "
            f"{columns.prompt!r} column's prompt, so the pair would be trained after two "
            f"prompts; expected only the reply turns, or the prompt's own messages first — "
            f"fix the row, or read it without the prompt column (data.prompt_key="
            f"{columns.chosen}) so the prompt is the messages both responses begin with"
        )
    return response


def split_prompt(
    row: Mapping[str, Any], columns: PairColumns = PairColumns(), where: str = "row"
) -> tuple[str | Messages, str | Messages, str | Messages]:
    """``(prompt, chosen response, rejected response)`` of one row in either layout."""
    for key in (columns.chosen, columns.rejected):
        if key not in row or row[key] is None:
            raise HfsdkError(
                f"{where} has no {key!r} column value (columns: {sorted(row)}); a preference "
                f"pair needs {columns.chosen!r} and {columns.rejected!r} (and optionally "
                f"{columns.prompt!r})"
            )
    chosen = as_messages(row[columns.chosen], f"{where}, column {columns.chosen!r}")
    rejected = as_messages(row[columns.rejected], f"{where}, column {columns.rejected!r}")
    chosen_value: str | Messages = chosen if chosen is not None else row[columns.chosen]
    rejected_value: str | Messages = rejected if rejected is not None else row[columns.rejected]
    if (chosen is None) != (rejected is None):
        raise HfsdkError(
            f"{where}: {columns.chosen!r} and {columns.rejected!r} differ in form (one text, one "
            "messages); give both as text or both as lists of messages"
        )
    if chosen_value == rejected_value:
        raise HfsdkError(
            f"{where}: {columns.chosen!r} and {columns.rejected!r} are the same response; a "
            "pair needs two different ones (this one trains nothing and counts as misranked)"
        )
    prompt_name = repr(columns.prompt) if columns.prompt else "prompt"
    prompt_value = row.get(columns.prompt) if columns.prompt else None
    if prompt_value is not None:
        prompt: str | Messages = (
            prompt_value
            if isinstance(prompt_value, str)
            else check_messages(prompt_value, f"{where}, column {columns.prompt!r}")
        )
        if chosen is not None and rejected is not None:
            chosen_value = _after_prompt(prompt, chosen, columns.chosen, columns, where)
            rejected_value = _after_prompt(prompt, rejected, columns.rejected, columns, where)
        return prompt, chosen_value, rejected_value
    if chosen is not None and rejected is not None:
        shared = _shared_messages(chosen, rejected)
        if shared == 0 or shared in (len(chosen), len(rejected)):
            raise HfsdkError(
                f"{where}: without a {prompt_name} column the prompt is the messages "
                f"{columns.chosen!r} and {columns.rejected!r} begin with, but they share "
                f"{shared} of {len(chosen)}/{len(rejected)} messages; add a {prompt_name} "
                "column or give both the same leading context messages"
            )
        # A response that opens with a user or system turn is a different question, not a
        # different answer: the pair would rank replies to two prompts (as _after_prompt
        # refuses with a prompt column).
        for name, response in ((columns.chosen, chosen), (columns.rejected, rejected)):
            if response[shared]["role"] in CONVERSATION_STARTS:
                raise HfsdkError(
                    f"{where}: {columns.chosen!r} and {columns.rejected!r} share only their "
                    f"first {shared} message(s), and {name!r} goes on with a "
                    f"{response[shared]['role']!r} turn, so the pair would answer two different "
                    "prompts; expected both to differ only from an assistant (or tool) turn on — "
                    f"add a {prompt_name} column, or make both responses continue the same "
                    "conversation"
                )
        return chosen[:shared], chosen[shared:], rejected[shared:]
    text_c, text_r = str(chosen_value), str(rejected_value)
    shared = _shared_text(text_c, text_r)
    if shared == 0:  # the cut is always before both ends, so only "no prompt" is left
        raise HfsdkError(
            f"{where}: without a {prompt_name} column the prompt is the text "
            f"{columns.chosen!r} and {columns.rejected!r} begin with up to a whitespace, but "
            f"they share no such text; add a {prompt_name} column"
        )
    return text_c[:shared], text_c[shared:], text_r[shared:]


def tokenize_preference_pair(
    row: Mapping[str, Any],
    tokenizer: Any,
    *,
    use_template: bool,
    columns: PairColumns = PairColumns(),
    append_eos: bool = True,
    where: str = "row",
) -> PreferencePair:
    """One dataset row as a :class:`PreferencePair` (see the module docstring for layouts).

    ``use_template``: whether the run renders chat with the tokenizer's template
    (:func:`hfsdk_datasets.resolve_use_template`).
    """
    prompt, chosen, rejected = split_prompt(row, columns, where)
    # The row's tool schemas, as SFT gives them: without them a tool-calling pair was
    # trained on a prompt that never showed the model its tools.
    tools = (
        check_tools(row.get(columns.tools), f"{where}, column {columns.tools!r}")
        if columns.tools
        else []
    )
    kwargs: dict[str, Any] = {
        "use_template": use_template,
        "append_eos": append_eos,
        "tools": tools,
    }
    chosen_seq = tokenize_supervised(
        prompt, chosen, tokenizer, where=f"{where}, {columns.chosen!r}", **kwargs
    )
    rejected_seq = tokenize_supervised(
        prompt, rejected, tokenizer, where=f"{where}, {columns.rejected!r}", **kwargs
    )
    if chosen_seq == rejected_seq:  # different text, the same tokens ("5" and " 5 ")
        raise HfsdkError(
            f"{where}: {columns.chosen!r} and {columns.rejected!r} tokenize to the same "
            "response; a pair needs two different ones (this one trains nothing and counts as "
            "misranked)"
        )
    rest = {
        k: v for k, v in row.items() if k not in (columns.prompt, columns.chosen, columns.rejected)
    }
    return PreferencePair(chosen=chosen_seq, rejected=rejected_seq, row=rest)


def tokenize_preference_pairs(
    rows: Iterable[Mapping[str, Any]],
    tokenizer: Any,
    *,
    use_template: bool,
    columns: PairColumns = PairColumns(),
    max_length: int | None = None,
    append_eos: bool = True,
    label: str = "row",
    allow_empty: bool = False,
) -> list[PreferencePair]:
    """Every row as a pair; pairs longer than ``max_length`` tokens are dropped with a warning.

    An empty result is an error (every pair too long, or no rows) unless ``allow_empty``
    (a step that draws other rows then). ``label`` names the rows in errors ("validation
    row": not read as a training row).
    """
    pairs: list[PreferencePair] = []
    dropped = 0
    for index, row in enumerate(rows):
        pair = tokenize_preference_pair(
            row,
            tokenizer,
            use_template=use_template,
            columns=columns,
            append_eos=append_eos,
            where=f"{label} {row.get('uid', index)}",  # the file's row, not the step's
        )
        if max_length is not None and pair.length() > max_length:
            dropped += 1
            continue
        pairs.append(pair)
    if dropped:
        logger.warning(
            "dropped %d of %d preference pairs longer than %d tokens",
            dropped,
            dropped + len(pairs),
            max_length,
        )
    if not pairs and not allow_empty:
        raise HfsdkError(
            "no preference pairs to train on"
            + (
                f": all {dropped} are longer than {max_length} tokens; raise the limit"
                if dropped
                else "; the dataset has no rows"
            )
        )
    return pairs


def load_preference_pairs(
    files: Sequence[str],
    tokenizer: Any,
    *,
    apply_chat_template: bool | None = None,
    columns: PairColumns = PairColumns(),
    max_length: int | None = None,
    append_eos: bool = True,
) -> list[PreferencePair]:
    """Read parquet/jsonl files (or a saved ``datasets`` directory) into tokenized pairs.

    ``apply_chat_template`` follows ``data.apply_chat_template`` (``None``: the
    template when the tokenizer has one).
    """
    from hfsdk_datasets import load_prompt_dataset, resolve_use_template

    dataset = load_prompt_dataset(files, columns.chosen)
    missing = [c for c in (columns.chosen, columns.rejected) if c not in dataset.column_names]
    if missing:
        raise HfsdkError(
            f"dataset {list(files)} has no column {missing[0]!r} (columns: "
            f"{dataset.column_names}); preference pairs need {columns.chosen!r} and "
            f"{columns.rejected!r}"
        )
    use_template = resolve_use_template(tokenizer, apply_chat_template)
    return tokenize_preference_pairs(
        dataset,
        tokenizer,
        use_template=use_template,
        columns=columns,
        max_length=max_length,
        append_eos=append_eos,
    )


def collate_preference_pairs(pairs: Sequence[PreferencePair], pad_token_id: int) -> Batch:
    """``2·len(pairs)`` interleaved rows (chosen, rejected, chosen, ...) as one batch.

    Tensors: the sequence layout of :func:`~hfsdk_supervised_data.conversation.collate_supervised`
    plus ``pair_index`` and ``chosen`` (both (2N,)). Non-tensors: each pair's other
    columns, repeated on both of its rows.
    """
    import torch

    if not pairs:
        raise HfsdkError("no preference pairs to collate; give at least one")
    sequences = [seq for pair in pairs for seq in (pair.chosen, pair.rejected)]
    tensors = collate_supervised(sequences, pad_token_id)
    tensors["pair_index"] = torch.arange(len(pairs)).repeat_interleave(2)
    tensors["chosen"] = torch.tensor([1, 0] * len(pairs), dtype=torch.long)
    keys = sorted({k for pair in pairs for k in pair.row})
    non_tensors = {k: [pair.row.get(k) for pair in pairs for _ in (0, 1)] for k in keys}
    return Batch.from_dict(tensors=tensors, non_tensors=non_tensors, meta={"pairs": len(pairs)})


def chosen_rows(values: Any) -> Any:
    """The chosen rows (``0, 2, 4, ...``) of a per-row tensor of an interleaved pair batch."""
    return values[0::2]


def rejected_rows(values: Any) -> Any:
    """The rejected rows (``1, 3, 5, ...``) of a per-row tensor of an interleaved pair batch."""
    return values[1::2]
