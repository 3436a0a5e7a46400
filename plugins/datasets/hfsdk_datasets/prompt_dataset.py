"""Prompt datasets: parquet, jsonl or a saved ``datasets`` directory -> batches of prompts."""

from __future__ import annotations

import codecs
import contextlib
import logging
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import torch

from hfsdk import DATA_DIR, PROMPT_MESSAGES, RENDERED_PROMPT, Batch, DataConfig, HfsdkError
from hfsdk_datasets.chat import (
    check_messages,
    is_messages,
    plain_rendering,
    render_prompt,
)
from hfsdk_datasets.columns import lift_nested
from hfsdk_datasets.json_columns import check_json_columns

logger = logging.getLogger(__name__)

_FORMATS = {".parquet": "parquet", ".jsonl": "json", ".json": "json"}


def load_prompt_dataset(files: Sequence[str], prompt_key: str) -> Any:
    """Load and concatenate ``files`` into one ``datasets.Dataset``.

    Each entry is a ``.parquet``, ``.jsonl``/``.json`` file or a directory saved with
    ``Dataset.save_to_disk``. A missing file, an unknown format, a missing prompt
    column or an empty result is an :class:`HfsdkError`.
    """
    import datasets

    if not files:
        raise HfsdkError("no dataset files given; set data.train_files to parquet/jsonl files")
    from datasets.utils import logging as datasets_logging

    # Its per-file progress bars would wrap every one-line error in console noise.
    bars_were_on = datasets_logging.is_progress_bar_enabled()
    datasets_logging.disable_progress_bar()
    try:
        return _load_files(datasets, files, prompt_key)
    finally:
        if bars_were_on:
            datasets_logging.enable_progress_bar()


def _load_files(datasets: Any, files: Sequence[str], prompt_key: str) -> Any:
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
                loaded = loaded["train"] if "train" in loaded else next(iter(loaded.values()))
            parts.append(_with_data_dir(loaded, path))
            continue
        if not path.is_file():
            raise HfsdkError(f"dataset file {name!r} does not exist; check data.train_files")
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
        parts.append(_with_data_dir(loaded, path.parent))
    dataset = parts[0] if len(parts) == 1 else datasets.concatenate_datasets(parts)
    if prompt_key not in dataset.column_names:
        raise HfsdkError(
            f"dataset {list(files)} has no column {prompt_key!r} (columns: "
            f"{dataset.column_names}); set data.prompt_key to the prompt column"
        )
    if len(dataset) == 0:
        raise HfsdkError(f"dataset {list(files)} is empty; it needs at least one prompt")
    return dataset


def _with_data_dir(dataset: Any, folder: Path) -> Any:
    """``dataset`` with the hidden ``data_dir`` column: relative paths in its rows (images)
    resolve from its own folder, not from wherever the run starts."""
    if DATA_DIR in dataset.column_names:
        return dataset
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


def resolve_use_template(tokenizer: Any, setting: bool | None) -> bool:
    """Whether prompts go through the chat template (``data.apply_chat_template``).

    ``None`` uses the template when the tokenizer has one; ``True`` without a
    template is an error.
    """
    has_template = bool(getattr(tokenizer, "chat_template", None))
    if setting and not has_template:
        raise HfsdkError(
            "data.apply_chat_template=true but the tokenizer has no chat template; set it to "
            "null (plain rendering) or use a tokenizer with a chat_template"
        )
    return has_template if setting is None else bool(setting)


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

    The row gains ``uid``, ``raw_prompt`` (plain text: what native reward
    functions get as ``prompts``), ``prompt_messages`` and ``rendered_prompt``
    (what the model sees).
    """
    prompt = row[prompt_key]
    where = f"row {index} of column {prompt_key!r}"
    if is_messages(prompt) or not isinstance(prompt, str):
        messages = check_messages(prompt, where)
        plain: str = plain_rendering(messages)
        text = render_prompt(messages, tokenizer, use_template, tools, where)
        if not use_template:
            name = _tokenizer_key(tokenizer)
            if name not in _PLAIN_RENDERING_LOGGED:
                _PLAIN_RENDERING_LOGGED.add(name)
                logger.warning(
                    "the tokenizer has no chat template: chat prompts use the plain rendering "
                    "(a lone user message is its content; otherwise 'role: content' lines and "
                    "'assistant:'), see docs/migrating.md"
                )
    else:
        messages = None
        plain = prompt
        text = render_prompt(prompt, tokenizer, use_template, tools, where)
    ids = tokenizer(text, add_special_tokens=not use_template)["input_ids"]
    prepared = {
        **lift_nested(row),
        "uid": index,
        "raw_prompt": plain,
        PROMPT_MESSAGES: messages,
        RENDERED_PROMPT: text,
    }
    return PreparedRow(row=prepared, token_ids=list(ids))


def _tokenizer_key(tokenizer: Any) -> str:
    return str(getattr(tokenizer, "name_or_path", "") or id(tokenizer))


def plain_rendering_reported(tokenizer: Any) -> None:
    """Say nothing more about ``tokenizer``'s missing chat template in this process: the
    caller reports it itself (``hfsdk data inspect``'s ``rendering:`` line)."""
    _PLAIN_RENDERING_LOGGED.add(_tokenizer_key(tokenizer))


class PromptLoader:
    """Tokenises a prompt dataset once and yields :class:`Batch` es of prompts forever.

    Prompts are left-padded (generation appends on the right). Each epoch is a
    fresh permutation from ``seed + epoch``, so the position ``(epoch, index)``
    is all a checkpoint needs to resume exactly.
    """

    def __init__(
        self,
        dataset: Any,
        tokenizer: Any,
        config: DataConfig,
        *,
        seed: int,
        tools: Sequence[Any] = (),
    ) -> None:
        self.config = config
        self.seed = seed
        self.pad_token_id = tokenizer.pad_token_id
        if self.pad_token_id is None:
            raise HfsdkError("the tokenizer has no pad token; set one before training")
        use_template = resolve_use_template(tokenizer, config.apply_chat_template)
        self.use_template = use_template
        self.rows: list[dict[str, Any]] = []
        self.token_ids: list[list[int]] = []
        dropped = 0
        for index, row in enumerate(dataset):
            prepared = prepare_row(row, index, config.prompt_key, tokenizer, use_template, tools)
            ids = prepared.token_ids
            if len(ids) > config.max_prompt_length:
                dropped += 1
                continue
            self.rows.append(prepared.row)
            self.token_ids.append(ids)
        self.dropped = dropped
        if not self.rows:  # the error alone: one line
            raise HfsdkError(
                f"every prompt is longer than data.max_prompt_length={config.max_prompt_length} "
                "tokens; raise the limit"
            )
        if dropped:
            logger.warning(
                "dropped %d of %d prompts longer than data.max_prompt_length=%d tokens",
                dropped,
                dropped + len(self.rows),
                config.max_prompt_length,
            )
        self.epoch = 0
        self.index = 0
        self._order = self._permutation(0)

    def __len__(self) -> int:
        return len(self.rows)

    def _permutation(self, epoch: int) -> list[int]:
        if not self.config.shuffle:
            return list(range(len(self.rows)))
        generator = torch.Generator().manual_seed(self.seed + epoch)
        return torch.randperm(len(self.rows), generator=generator).tolist()

    def next_batch(self, n: int | None = None) -> Batch:
        """The next ``n`` prompts (default ``data.batch_size``), wrapping into the next epoch.

        Every call advances the one position that :meth:`state_dict` saves, so
        prompts an algorithm draws within a step are resumed exactly too.
        """
        size = self.config.batch_size if n is None else n
        if size < 1:
            raise HfsdkError(f"next_batch(n={n}) needs n >= 1 prompts")
        picked: list[int] = []
        while len(picked) < size:
            if self.index >= len(self._order):
                self.epoch += 1
                self.index = 0
                self._order = self._permutation(self.epoch)
            picked.append(self._order[self.index])
            self.index += 1
        return self.collate(picked)

    def collate(self, indices: Sequence[int]) -> Batch:
        """Left-padded ``input_ids``/``attention_mask`` plus every dataset column."""
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
        return Batch.from_dict(
            tensors={"input_ids": input_ids, "attention_mask": attention_mask},
            non_tensors=columns,
        )

    def whole(self) -> Batch:
        """Every kept prompt, in file order, as one batch (what validation scores)."""
        return self.collate(range(len(self.rows)))

    def state_dict(self) -> dict[str, int]:
        """Position in the data stream, for exact resumption."""
        return {"epoch": self.epoch, "index": self.index}

    def load_state_dict(self, state: Mapping[str, int]) -> None:
        """Continue from a saved position."""
        self.epoch = int(state["epoch"])
        self.index = int(state["index"])
        self._order = self._permutation(self.epoch)
