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

    directory = Path(path).expanduser()
    what = "is not a directory" if directory.exists() else "does not exist"
    fast = (directory / "tokenizer.json").is_file()
    try:
        if not directory.is_dir():
            raise NotADirectoryError(what)
        loader = PreTrainedTokenizerFast if fast else AutoTokenizer
        tokenizer = loader.from_pretrained(str(directory), local_files_only=True)
    except Exception as exc:  # the loader's first line says what in the directory it could not read
        said = str(exc).strip().partition("\n")[0] or type(exc).__name__
        reason = what if isinstance(exc, NotADirectoryError) else "holds no tokenizer that loads"
        raise HfsdkError(
            f"{key}={str(path)!r} {reason}; point it at a local model directory (or one made with "
            f"tokenizer.save_pretrained){'' if fast else ' holding tokenizer.json'}; hfsdk never "
            "downloads from the hub" + ("" if reason == what else f" (the loader said: {said})")
        ) from exc
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise HfsdkError(
                f"the tokenizer in {str(path)!r} has neither a pad nor an EOS token; add one "
                "(tokenizer.add_special_tokens({'pad_token': ...}) and save it again)"
            )
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer
