"""The one tokenizer loader of hfsdk (a leaf module: anything may import it).

The controller (preflight, data, rewards) and every backend's workers (training
engines, rollout replicas, judges) load a run's tokenizer through
:func:`load_tokenizer`, so they agree on its ids and on its pad token.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hfsdk.core.errors import HfsdkError


def load_tokenizer(path: str | Path, key: str = "tokenizer path") -> Any:
    """The tokenizer saved in the local directory ``path`` (never downloaded); errors say ``key``.

    A ``tokenizer.json`` loads with ``PreTrainedTokenizerFast`` directly, so a locally trained
    tokenizer keeps its exact ids whatever architecture the directory's config names; other
    saved tokenizers (sentencepiece, vocab files) go through ``AutoTokenizer``. One without a
    pad token pads with its EOS token (as TRL and verl do); one without either is refused.
    """
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    directory, named = Path(path).expanduser(), f"{key}={str(path)!r}"
    to_dir = "point it at a local model directory (or one made with tokenizer.save_pretrained)"
    if not directory.is_dir():
        what = "is not a directory" if directory.exists() else "does not exist"
        raise HfsdkError(f"{named} {what}; {to_dir}; hfsdk never downloads from the hub")
    if not any(f for glob in ("tokenizer*", "vocab.*", "*.model") for f in directory.glob(glob)):
        role = key.rpartition(".")[0]  # a model directory saved without its tokenizer
        other = f"set {role}.tokenizer_path=DIR to" if role else "point it at"
        raise HfsdkError(
            f"{named} has no tokenizer files (tokenizer*, vocab.*, *.model); save one there "
            f"(tokenizer.save_pretrained({str(path)!r})) or {other} a directory holding one; "
            "hfsdk never downloads from the hub"
        )
    fast = (directory / "tokenizer.json").is_file()
    try:
        loader = PreTrainedTokenizerFast if fast else AutoTokenizer
        tokenizer = loader.from_pretrained(str(directory), local_files_only=True)
    except Exception as exc:  # the loader's words, all of them (a first line may end mid-sentence)
        to_dir += "" if fast else " holding tokenizer.json"
        raise HfsdkError(
            f"{named} holds no tokenizer that loads; {to_dir}; hfsdk never downloads from the hub "
            f"(the loader said: {' '.join(str(exc).split()) or type(exc).__name__})"
        ) from exc
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise HfsdkError(
                f"the tokenizer in {str(path)!r} has neither a pad nor an EOS token; add one "
                "(tokenizer.add_special_tokens({'pad_token': ...}) and save it again)"
            )
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer
