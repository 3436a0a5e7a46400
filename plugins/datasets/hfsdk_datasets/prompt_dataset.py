"""Prompt datasets: parquet, jsonl or a saved ``datasets`` directory -> batches of prompts."""

from __future__ import annotations

import codecs
import contextlib
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import torch

from hfsdk import (
    DATA_DIR,
    HIDDEN_COLUMNS,
    PROMPT_MESSAGES,
    RENDERED_PROMPT,
    Batch,
    DataConfig,
    HfsdkError,
)
from hfsdk_datasets.chat import (
    check_messages,
    is_messages,
    plain_rendering,
    render_prompt,
)
from hfsdk_datasets.columns import lift_nested
from hfsdk_datasets.dataset_parts import (
    concatenate_parts,
    data_description,
    files_key,
    pick_split,
)
from hfsdk_datasets.json_columns import check_json_columns

logger = logging.getLogger(__name__)

ORDER_VERSION = 2
"""How epoch orders derive from the seed; 1 (``seed + epoch``) for checkpoints from before."""
_FORMATS = {".parquet": "parquet", ".jsonl": "json", ".json": "json"}


def load_prompt_dataset(
    files: Sequence[str], prompt_key: str, *, validation: bool = False, source: str | None = None
) -> Any:
    """Load and concatenate ``files`` into one ``datasets.Dataset``.

    Each entry is a ``.parquet``, ``.jsonl``/``.json`` file or a directory saved with
    ``Dataset.save_to_disk`` (a ``DatasetDict``'s split: see :func:`pick_split`).
    ``validation`` says the files are ``data.val_files``: which split a
    ``DatasetDict`` gives and what errors name. A missing file, an unknown format, a
    missing prompt column, columns whose types differ between files or an empty
    result is an :class:`HfsdkError`. ``source`` names where ``files`` came from in the
    error for a missing one (``"the FILE arguments"``; default: ``data.train_files`` or
    ``data.val_files``).
    """
    import datasets

    if not files:
        raise HfsdkError(
            f"no dataset files given; set {files_key(validation)} to parquet/jsonl files"
        )
    from datasets.utils import logging as datasets_logging

    # Its per-file progress bars would wrap every one-line error in console noise.
    bars_were_on = datasets_logging.is_progress_bar_enabled()
    datasets_logging.disable_progress_bar()
    try:
        return _load_files(datasets, files, prompt_key, validation, source)
    finally:
        if bars_were_on:
            datasets_logging.enable_progress_bar()


def _load_files(
    datasets: Any, files: Sequence[str], prompt_key: str, validation: bool, source: str | None
) -> Any:
    parts = []
    for name in files:
        path = Path(name)
        if path.is_dir():
            try:
                loaded = datasets.load_from_disk(str(path))
            except Exception as exc:
                raise HfsdkError(
                    f"dataset directory {name!r} could not be loaded ({exc}); expected a "
                    "directory written by Dataset.save_to_disk"
                ) from exc
            if isinstance(loaded, datasets.DatasetDict):
                loaded = pick_split(loaded, name, validation)
            parts.append(_with_data_dir(loaded, path, name, validation))
            continue
        if not path.is_file():
            where = source or files_key(validation)
            if not path.exists():
                # Users look beside the config file; a relative path resolves from here.
                base = (
                    ""
                    if path.is_absolute()
                    else f" (relative to the working directory {os.getcwd()})"
                )
                raise HfsdkError(f"dataset file {name!r} does not exist{base}; check {where}")
            # A FIFO or a device exists but is no file the loader can read (and reading a
            # FIFO would block on its writer).
            kind = (
                "a FIFO"
                if path.is_fifo()
                else "a device"
                if path.is_char_device() or path.is_block_device()
                else "a socket"
                if path.is_socket()
                else "not a file"
            )
            raise HfsdkError(
                f"dataset file {name!r} is not a regular file ({kind}); expected a .jsonl, "
                ".json or .parquet file or a saved dataset directory; write the prompts to a "
                f"file and check {where}"
            )
        fmt = _FORMATS.get(path.suffix.lower())
        if fmt is None:
            raise HfsdkError(
                f"dataset file {name!r} has an unknown format; expected .parquet, .jsonl, "
                ".json or a saved dataset directory"
            )
        if fmt == "json" and not _utf8_content(path, name):
            # datasets fails on an empty json file with a bare StopIteration.
            raise HfsdkError(f"dataset {name!r} is empty; add at least one prompt")
        try:
            with _quiet_loader_log(datasets):
                loaded = datasets.load_dataset(fmt, data_files=str(path), split="train")
        except Exception as exc:
            # datasets wraps the reader's error; its cause says what is wrong with the file.
            said = f"{exc} {exc.__cause__ or ''}"
            if "no data" in said or "BatchSize must be greater than 0" in said:
                raise HfsdkError(f"dataset {name!r} is empty; add at least one prompt") from exc
            cause = exc.__cause__ or exc
            first = (str(cause).strip().splitlines() or [type(cause).__name__])[0]
            raise HfsdkError(
                f"dataset file {name!r} could not be read ({first}); expected one JSON object "
                "per line (jsonl) or a parquet file"
            ) from exc
        if fmt == "json":
            check_json_columns(loaded, path, name)
        parts.append(_with_data_dir(loaded, path.parent, name, validation))
    dataset = parts[0] if len(parts) == 1 else concatenate_parts(datasets, parts, files)
    if prompt_key not in dataset.column_names:
        # The loader's hidden data_dir is no column the user could name.
        shown = [column for column in dataset.column_names if column not in HIDDEN_COLUMNS]
        raise HfsdkError(
            f"dataset {list(files)} has no column {prompt_key!r} (columns: "
            f"{shown}); set data.prompt_key to the prompt column"
        )
    if len(dataset) == 0:
        raise HfsdkError(f"dataset {list(files)} is empty; it needs at least one prompt")
    return dataset


def _with_data_dir(dataset: Any, folder: Path, name: str, validation: bool) -> Any:
    """``dataset`` (file or directory ``name``) with the hidden ``data_dir`` column: relative
    paths in its rows (images) resolve from its own folder, not from wherever the run starts.
    A file's own reserved column (``data_dir`` too) is refused: it would be replaced or hidden."""
    refuse_reserved_columns(dataset.column_names, data_description(validation, [name]))
    return dataset.add_column(DATA_DIR, [str(folder.resolve())] * len(dataset))


def _utf8_content(path: Path, name: str) -> bool:
    """Whether ``path`` holds anything but whitespace; an error unless it is UTF-8 text
    (read in blocks; files may be large)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    content, offset = False, 0
    with path.open("rb") as handle:
        while True:
            block = handle.read(1 << 16)
            try:
                decoder.decode(block, final=not block)
            except UnicodeDecodeError as err:
                raise HfsdkError(
                    f"dataset file {name!r} is not UTF-8 text (byte {offset + err.start}); "
                    "save it as UTF-8"
                ) from None
            if not block:
                return content
            content = content or bool(block.strip())
            offset += len(block)


@contextlib.contextmanager
def _quiet_loader_log(datasets: Any) -> Iterator[None]:
    """Without datasets' own log lines: a file it cannot read is one error line, said once."""
    from datasets.utils import logging as datasets_logging

    level = datasets_logging.get_verbosity()
    datasets_logging.set_verbosity(datasets_logging.CRITICAL)
    try:
        yield
    finally:
        datasets_logging.set_verbosity(level)


_PLAIN_RENDERING_LOGGED: set[str] = set()
"""Tokenizers the plain-rendering notice was logged for (once per run, not per loader)."""

_DOUBLE_BOS_LOGGED: set[str] = set()
"""Tokenizers the double-BOS warning was logged for (once per run, not per row)."""

_APPENDED_EOS_LOGGED: set[str] = set()
"""Tokenizers the appended-EOS warning was logged for (once per run, not per row)."""

RESERVED_COLUMNS = ("uid", "raw_prompt", PROMPT_MESSAGES, RENDERED_PROMPT, DATA_DIR)
"""Columns the loader writes itself: :func:`prepare_row` into every row, ``data_dir`` into
every row read from a file; a dataset's own would be overwritten (or, ``data_dir``, taken as
the image folder and hidden from reward functions)."""


def resolve_use_template(tokenizer: Any, setting: bool | None) -> bool:
    """Whether prompts go through the chat template (``data.apply_chat_template``).

    ``None`` uses the template when the tokenizer has one, for string prompts too
    (as one user message); ``True`` without a template is an error.
    """
    has_template = bool(getattr(tokenizer, "chat_template", None))
    if setting and not has_template:
        raise HfsdkError(
            "data.apply_chat_template=true but the tokenizer has no chat template; set it to "
            "null (plain rendering) or use a tokenizer with a chat_template"
        )
    return has_template if setting is None else bool(setting)


def plain_rendering_cause(tokenizer: Any) -> str:
    """Why prompts get the plain rendering: the tokenizer has no template, or the run
    turned it off (with a template, only ``data.apply_chat_template=false`` leads here)."""
    if getattr(tokenizer, "chat_template", None):
        return "data.apply_chat_template=false"
    return "the tokenizer has no chat template"


def refuse_reserved_columns(columns: Sequence[str], source: str) -> None:
    """One line when the dataset has a column the loader writes itself (:data:`RESERVED_COLUMNS`):
    its values would be replaced without a word."""
    taken = [column for column in RESERVED_COLUMNS if column in columns]
    if taken:
        raise HfsdkError(
            f"{source} has the column(s) {', '.join(map(repr, taken))}, which the loader writes "
            f"itself (reserved: {', '.join(RESERVED_COLUMNS)}); rename them in the data "
            f"(e.g. 'source_{taken[0]}')"
        )


def _own_columns(columns: Sequence[str]) -> list[str]:
    """``columns`` but ``data_dir``: here it is the file loader's (a file's own was refused when
    loaded) or a prompt source's (``docs/plugin_hooks.md``), never a column to refuse."""
    return [column for column in columns if column != DATA_DIR]


@attrs.frozen(kw_only=True)
class PreparedRow:
    """A dataset row ready for training: its columns (with hidden ones) and prompt token ids."""

    row: dict[str, Any]
    token_ids: list[int]


def prepare_row(
    row: dict[str, Any],
    index: int,
    prompt_key: str,
    tokenizer: Any,
    use_template: bool,
    tools: Sequence[Any] = (),
) -> PreparedRow:
    """Check, render and tokenise one row's prompt; lift verl's nested reward fields.

    The row gains ``uid`` (its index in the dataset), ``raw_prompt`` (plain text:
    what native reward functions get as ``prompts``), ``prompt_messages`` and
    ``rendered_prompt`` (what the model sees).
    """
    prompt = row[prompt_key]
    where = f"row {index} of column {prompt_key!r}"
    if is_messages(prompt) or not isinstance(prompt, str):
        messages = check_messages(prompt, where)
        plain: str = plain_rendering(messages)
        text = render_prompt(messages, tokenizer, use_template, tools, where)
        if not use_template:
            _announce_plain_rendering(tokenizer)
    else:
        messages = None
        plain = prompt
        text = render_prompt(prompt, tokenizer, use_template, tools, where)
    ids = tokenizer(text, add_special_tokens=not use_template)["input_ids"]
    _refuse_blank_prompt(plain, ids, where)
    if messages is None:
        _warn_double_bos(prompt, ids, tokenizer, where, use_template)
    _warn_appended_eos(text, ids, tokenizer, where)
    prepared = {
        **lift_nested(row),
        "uid": index,
        "raw_prompt": plain,
        PROMPT_MESSAGES: messages,
        RENDERED_PROMPT: text,
    }
    return PreparedRow(row=prepared, token_ids=list(ids))


def _refuse_blank_prompt(plain: str, ids: Sequence[int], where: str) -> None:
    """One line when a prompt is blank or tokenizes to no tokens.

    Without a BOS such a row is all padding, so it would be sampled from and trained on
    with no context at all; with a BOS it is still no prompt.
    """
    if not plain.strip():
        raise HfsdkError(
            f"{where} is blank ({plain!r}); expected prompt text; fill the prompt or remove the row"
        )
    if not ids:
        raise HfsdkError(
            f"{where} ({plain[:60]!r}) tokenizes to no tokens; expected at least one; fill "
            "the prompt with text the tokenizer reads or remove the row"
        )


def _announce_plain_rendering(tokenizer: Any) -> None:
    """Say once per tokenizer, by its real cause, that chat prompts get the plain rendering."""
    name = _tokenizer_key(tokenizer)
    if name not in _PLAIN_RENDERING_LOGGED:
        _PLAIN_RENDERING_LOGGED.add(name)
        logger.warning(
            "%s: chat prompts use the plain rendering (a lone user message is its content; "
            "otherwise 'role: content' lines and 'assistant:'), see docs/migrating.md",
            plain_rendering_cause(tokenizer),
        )


def _warn_double_bos(
    prompt: str, ids: Sequence[int], tokenizer: Any, where: str, use_template: bool
) -> None:
    """Warn once per tokenizer when a string prompt written with the BOS token's text gets
    BOS again (from the chat template or the tokenizer): the model would see two, a
    sequence it never saw in training. The ids are counted, not their first two compared:
    a template puts its role tokens between its BOS and the prompt's. They are compared with
    the BOS texts the prompt holds, not with one: a pre-rendered multi-turn prompt (Llama-2's
    ``<s>[INST] ... </s><s>[INST] ...``) writes one BOS per turn, and only more BOS ids than
    that mean one was added."""
    bos_text, bos_id = getattr(tokenizer, "bos_token", None), tokenizer.bos_token_id
    if not bos_text or bos_id is None or not prompt.lstrip().startswith(bos_text):
        return
    if list(ids).count(bos_id) <= prompt.count(bos_text):
        return
    name = _tokenizer_key(tokenizer)
    if name in _DOUBLE_BOS_LOGGED:
        return
    _DOUBLE_BOS_LOGGED.add(name)
    logger.warning(
        "%s starts with the BOS token %r and the %s adds BOS again: the model sees two BOS "
        "tokens; remove the leading %r from the prompts",
        where,
        bos_text,
        "chat template" if use_template else "tokenizer",
        bos_text,
    )


def _warn_appended_eos(text: str, ids: Sequence[int], tokenizer: Any, where: str) -> None:
    """Warn once per tokenizer when the encoding ends with an EOS the text does not hold:
    the tokenizer appends it, so the model would be asked to continue after the end of a
    sequence, silently. The fix named is the one a fast tokenizer obeys: its
    ``tokenizer.json`` post-processor, not ``add_eos_token`` (which it ignores)."""
    eos_text, eos_id = getattr(tokenizer, "eos_token", None), tokenizer.eos_token_id
    if eos_id is None or not ids or ids[-1] != eos_id or (eos_text and eos_text in text):
        return
    name = _tokenizer_key(tokenizer)
    if name in _APPENDED_EOS_LOGGED:
        return
    _APPENDED_EOS_LOGGED.add(name)
    logger.warning(
        "%s ends with the EOS token %r that the tokenizer appends to every encoding: the "
        'model is asked to continue after end-of-sequence; remove %r from the "single" '
        "template of the post_processor (TemplateProcessing) in the tokenizer's tokenizer.json",
        where,
        eos_text,
        eos_text,
    )


def _tokenizer_key(tokenizer: Any) -> str:
    return str(getattr(tokenizer, "name_or_path", "") or id(tokenizer))


def plain_rendering_reported(tokenizer: Any) -> None:
    """Say nothing more about ``tokenizer``'s plain rendering in this process: the
    caller reports it itself (``hfsdk data inspect``'s ``rendering:`` line)."""
    _PLAIN_RENDERING_LOGGED.add(_tokenizer_key(tokenizer))


class PromptLoader:
    """Tokenises a prompt dataset once and yields :class:`Batch` es of prompts forever.

    Prompts are left-padded (generation appends on the right). Each epoch is a
    fresh permutation from the pair ``(seed, epoch)``, so the position ``(epoch, index)``
    is all a checkpoint needs to resume exactly. ``validation`` and ``files`` say
    whose data it is (``data.val_files`` or ``data.train_files``) for messages.
    """

    def __init__(
        self,
        dataset: Any,
        tokenizer: Any,
        config: DataConfig,
        *,
        seed: int,
        tools: Sequence[Any] = (),
        validation: bool = False,
        files: Sequence[str] = (),
    ) -> None:
        self.config = config
        self.seed = seed
        self.validation = validation
        self.files = tuple(files)
        self.pad_token_id = tokenizer.pad_token_id
        if self.pad_token_id is None:
            raise HfsdkError("the tokenizer has no pad token; set one before training")
        use_template = resolve_use_template(tokenizer, config.apply_chat_template)
        self.use_template = use_template
        self.rows: list[dict[str, Any]] = []
        self.token_ids: list[list[int]] = []
        self._tokenize(dataset, tokenizer, tools)
        self._check_size()
        self._warned_size = False
        self.epoch = 0
        self.index = 0
        self._order_version = ORDER_VERSION
        self._order = self._permutation(0)

    def _source(self) -> str:
        """The data in messages: which data and files where the caller said so."""
        return data_description(self.validation, self.files)

    def _tokenize(self, dataset: Any, tokenizer: Any, tools: Sequence[Any]) -> None:
        """Fill ``rows``/``token_ids`` with the prompts within ``data.max_prompt_length``."""
        config = self.config
        columns = getattr(dataset, "column_names", None)
        if columns is not None:
            refuse_reserved_columns(_own_columns(columns), self._source())
        dropped = 0
        for index, row in enumerate(dataset):
            if columns is None and index == 0:
                refuse_reserved_columns(_own_columns(list(row)), self._source())
            prepared = prepare_row(
                row, index, config.prompt_key, tokenizer, self.use_template, tools
            )
            ids = prepared.token_ids
            if len(ids) > config.max_prompt_length:
                dropped += 1
                continue
            self.rows.append(prepared.row)
            self.token_ids.append(ids)
        self.dropped = dropped

    def _check_size(self) -> None:
        """Refuse data with no prompt short enough; say what was dropped."""
        config = self.config
        named = self.validation or bool(self.files)  # else the caller names the data itself
        of = f" of {self._source()}" if named else ""
        if not self.rows:  # the error alone: one line
            raise HfsdkError(
                f"every prompt{of} is longer than data.max_prompt_length="
                f"{config.max_prompt_length} tokens; raise the limit"
            )
        if self.dropped:
            logger.warning(
                "dropped %d of %d prompts longer than data.max_prompt_length=%d tokens%s",
                self.dropped,
                self.dropped + len(self.rows),
                config.max_prompt_length,
                f" from {self._source()}" if named else "",
            )

    def __len__(self) -> int:
        return len(self.rows)

    def _permutation(self, epoch: int) -> list[int]:
        if not self.config.shuffle:
            return list(range(len(self.rows)))
        # One generator seed per (seed, epoch) pair (seed < 2**32): "seed + epoch" made
        # seed 1's first epoch seed 0's second, so a seed sweep shared its orders. Checkpoints
        # written before (no "order" in their state) keep the old orders to resume exactly.
        legacy = self._order_version < ORDER_VERSION
        key = self.seed + epoch if legacy else self.seed * 2**32 + epoch
        generator = torch.Generator().manual_seed(key)
        return torch.randperm(len(self.rows), generator=generator).tolist()

    def next_batch(self, n: int | None = None) -> Batch:
        """The next ``n`` prompts (default ``data.batch_size``), wrapping into the next epoch.

        Every call advances the one position that :meth:`state_dict` saves, so
        prompts an algorithm draws within a step are resumed exactly too.
        """
        size = self.config.batch_size if n is None else n
        if size < 1:
            raise HfsdkError(f"next_batch(n={n}) needs n >= 1 prompts")
        if size > len(self.rows) and not self._warned_size:
            self._warn_size(size, n is None)
        picked: list[tuple[int, int]] = []  # (epoch, row)
        while len(picked) < size:
            if self.index >= len(self._order):
                self.epoch += 1
                self.index = 0
                self._order = self._permutation(self.epoch)
            picked.append((self.epoch, self._order[self.index]))
            self.index += 1
        return self.collate([row for _, row in picked], uids=self._draw_uids(picked))

    def _warn_size(self, size: int, configured: bool) -> None:
        """Say once that a draw is larger than the data: it holds some prompts twice.

        Said at the first such draw, not on loading: a run refused before its first step
        (or ``hfsdk data inspect``) has nothing to say about batches.
        """
        self._warned_size = True
        logger.warning(
            "%s is more than the %d prompt(s) of %s: a batch draws some prompts more than "
            "once (each draw its own group); lower data.batch_size or add prompts",
            f"data.batch_size={size}" if configured else f"a draw of {size} prompts",
            len(self.rows),
            self._source(),
        )

    def _draw_uids(self, picked: Sequence[tuple[int, int]]) -> list[Any]:
        """One group id per draw of ``picked`` ``(epoch, row)``.

        Advantage estimators group samples by ``uid``, so a prompt drawn twice in one
        batch (the batch runs into the next epoch's permutation) must not share one: two
        groups of n would become one of 2n. A first draw keeps the row's ``uid`` (its
        index in the dataset: what error messages and earlier rollout dumps show); a
        repeat gets ``"<uid>@epoch<N>"``, from the position alone, so resuming gives the
        same ids.
        """
        seen: set[int] = set()
        uids: list[Any] = []
        for epoch, row in picked:
            uid = self.rows[row]["uid"]
            uids.append(f"{uid}@epoch{epoch}" if row in seen else uid)
            seen.add(row)
        return uids

    def collate(self, indices: Sequence[int], uids: Sequence[Any] | None = None) -> Batch:
        """Left-padded ``input_ids``/``attention_mask`` plus every dataset column;
        ``uids`` replace the rows' own ``uid`` (one per index: :meth:`_draw_uids`)."""
        width = max(len(self.token_ids[i]) for i in indices)
        input_ids = torch.full((len(indices), width), self.pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros((len(indices), width), dtype=torch.long)
        for row, i in enumerate(indices):
            ids = self.token_ids[i]
            input_ids[row, width - len(ids) :] = torch.tensor(ids, dtype=torch.long)
            attention_mask[row, width - len(ids) :] = 1
        columns: dict[str, list[Any]] = {}
        for i in indices:
            for key, value in self.rows[i].items():
                columns.setdefault(key, []).append(value)
        if uids is not None:
            columns["uid"] = list(uids)
        return Batch.from_dict(
            tensors={"input_ids": input_ids, "attention_mask": attention_mask},
            non_tensors=columns,
        )

    def whole(self) -> Batch:
        """Every kept prompt, in file order, as one batch (what validation scores)."""
        return self.collate(range(len(self.rows)))

    def state_dict(self) -> dict[str, int]:
        """Position in the data stream, for exact resumption."""
        return {"epoch": self.epoch, "index": self.index, "order": self._order_version}

    def load_state_dict(self, state: Mapping[str, int]) -> None:
        """Continue from a saved position (in the orders the state was drawn with)."""
        self.epoch = int(state["epoch"])
        self.index = int(state["index"])
        self._order_version = int(state.get("order", 1))
        self._order = self._permutation(self.epoch)
