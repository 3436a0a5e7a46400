"""The one tokenizer loader of hfsdk (a leaf module: anything may import it).

The controller (preflight, data, rewards) and every backend's workers (training
engines, rollout replicas, judges) load a run's tokenizer through
:func:`load_tokenizer`, so they agree on its ids and on its pad token.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hfsdk.core.errors import HfsdkError


def load_tokenizer(path: str | Path) -> Any:
    """The tokenizer saved in the local directory ``path`` (never a hub download).

    A ``tokenizer.json`` is loaded with ``PreTrainedTokenizerFast`` directly, so a
    locally trained tokenizer keeps its exact ids whatever architecture the
    directory's config names; other saved tokenizers (sentencepiece, vocab files)
    go through ``AutoTokenizer``. A tokenizer without a pad token pads with its
    EOS token (as TRL and verl do); one without either is refused.
    """
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    directory = Path(path).expanduser()
    if not directory.is_dir():
        what = "is not a directory" if directory.exists() else "does not exist"
        raise HfsdkError(
            f"tokenizer path {str(path)!r} {what}; point actor.model_path (or tokenizer_path) at a "
            "local model directory that holds tokenizer.json (hfsdk never downloads from the hub)"
        )
    fast = (directory / "tokenizer.json").is_file()
    loader = PreTrainedTokenizerFast if fast else AutoTokenizer
    try:
        tokenizer = loader.from_pretrained(str(directory), local_files_only=True)
    except Exception as exc:
        raise HfsdkError(
            f"no tokenizer could be loaded from {str(path)!r} ({exc}); point actor.model_path at "
            "a local model directory that holds tokenizer.json"
        ) from exc
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise HfsdkError(
                f"the tokenizer in {str(path)!r} has neither a pad nor an EOS token; add one "
                "(tokenizer.add_special_tokens({'pad_token': ...}) and save it again)"
            )
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer
