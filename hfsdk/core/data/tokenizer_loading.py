"""Loading a run's tokenizer from a local directory (a leaf module: anything may import it)."""

from __future__ import annotations

from typing import Any

from hfsdk.core.errors import HfsdkError


def load_tokenizer(path: str) -> Any:
    """The tokenizer of ``path`` (fast tokenizer files; never a hub download)."""
    from pathlib import Path

    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    # tokenizer.json keeps its exact ids through PreTrainedTokenizerFast; other saved
    # tokenizers (sentencepiece, vocab files) go through AutoTokenizer.
    fast = (Path(path).expanduser() / "tokenizer.json").is_file()
    loader = PreTrainedTokenizerFast if fast else AutoTokenizer
    try:
        tokenizer = loader.from_pretrained(str(Path(path).expanduser()), local_files_only=True)
    except Exception as exc:
        raise HfsdkError(
            f"no tokenizer could be loaded from {path!r} ({exc}); point actor.model_path at a "
            "local model directory that holds tokenizer.json"
        ) from exc
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer
