"""Loading a role's tokenizer from a local directory (every backend the same way)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from hfsdk import HfsdkError

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


def load_tokenizer(path: str | Path) -> PreTrainedTokenizerBase:
    """The tokenizer saved in ``path``.

    A ``tokenizer.json`` is loaded with ``PreTrainedTokenizerFast`` directly, so
    a locally trained tokenizer keeps its exact ids whatever architecture the
    directory's config names.
    """
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    directory = Path(path).expanduser()
    if (directory / "tokenizer.json").is_file():
        return PreTrainedTokenizerFast.from_pretrained(str(directory))
    if not directory.is_dir():
        raise HfsdkError(f"tokenizer path {str(path)!r} is not a directory")
    return AutoTokenizer.from_pretrained(str(directory))
