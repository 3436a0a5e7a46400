"""Load a role's HF transformers model from a local directory.

Three kinds, all built on the same causal-LM checkpoint:

- ``causal_lm``: the actor and the reference (``AutoModelForCausalLM``; a
  vision-language model transformers has no causal-LM class for, e.g. Qwen2-VL, through
  ``AutoModelForImageTextToText``);
- ``token_value``: the critic, a one-output head on the backbone giving one
  value per token (``AutoModelForTokenClassification`` with ``num_labels=1``);
- ``sequence_score``: a reward or cost model, a one-output head read at the
  last response token (``AutoModelForSequenceClassification``, ``num_labels=1``).

A new head starts untrained (HF's initialisation) the first time a causal-LM
directory is loaded this way; a directory saved from such a model loads with
its trained head.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from hfsdk import HfsdkError
from hfsdk_backend_common.rollout.generation_module import image_text_only

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel

log = logging.getLogger(__name__)

ModelKind = Literal["causal_lm", "token_value", "sequence_score"]
MODEL_KINDS: tuple[str, ...] = ("causal_lm", "token_value", "sequence_score")


@contextlib.contextmanager
def quiet_loading() -> Iterator[None]:
    """Hide transformers' per-load progress bar and load report (noise in every worker's log).

    :func:`load_model` reports what matters (a head that starts untrained) in one line.
    """
    from transformers.utils import logging as hf_logging

    was_on = hf_logging.is_progress_bar_enabled()
    verbosity = hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if was_on:
            hf_logging.enable_progress_bar()


def check_model_dir(path: str | Path | None, role: str) -> Path:
    """``path`` as a Path when it is a local HF model directory, else a clear error."""
    if path is None:
        raise HfsdkError(
            f"role {role!r} has no model_path; set '{role}.model_path' to a local HF model "
            "directory (or use the built-in default task)"
        )
    directory = Path(path).expanduser()
    if not (directory / "config.json").is_file():
        raise HfsdkError(
            f"'{role}.model_path' is {str(path)!r}, which is not a local HF model directory "
            "(no config.json there); hfsdk never downloads models — pass a directory made "
            "with save_pretrained"
        )
    return directory


def _loader_and_config(
    path: str | Path, kind: ModelKind, pad_token_id: int | None
) -> tuple[dict[str, Any], Any]:
    from transformers import (
        AutoConfig,
        AutoModelForCausalLM,
        AutoModelForSequenceClassification,
        AutoModelForTokenClassification,
    )

    if kind not in MODEL_KINDS:
        raise HfsdkError(f"model kind {kind!r} is unknown; expected one of {MODEL_KINDS}")
    loaders = {
        "causal_lm": AutoModelForCausalLM,
        "token_value": AutoModelForTokenClassification,
        "sequence_score": AutoModelForSequenceClassification,
    }
    config = AutoConfig.from_pretrained(str(path))
    if kind == "causal_lm" and image_text_only(config):
        # A vision-language model generates text but is no causal LM to transformers.
        from transformers import AutoModelForImageTextToText

        loaders["causal_lm"] = AutoModelForImageTextToText
    if kind != "causal_lm":
        config.num_labels = 1
        if getattr(config, "pad_token_id", None) is None and pad_token_id is not None:
            config.pad_token_id = pad_token_id
    if kind == "token_value":
        # A value head must be deterministic: no dropout between backbone and head.
        config.classifier_dropout = 0.0
    return loaders, config


def has_tied_weights(path: str | Path) -> bool:
    """Whether the model in ``path`` ties its output layer to its input embeddings."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(str(path))
    text_config = getattr(config, "get_text_config", lambda: config)()
    return bool(getattr(text_config, "tie_word_embeddings", False))


def build_model_on_meta(
    path: str | Path,
    kind: ModelKind,
    dtype: torch.dtype,
    *,
    pad_token_id: int | None = None,
) -> PreTrainedModel:
    """The model of ``kind`` described by ``path``'s config, with no storage (meta device).

    Ranks other than 0 build this, shard it and receive their shards from rank 0,
    so no rank but the reader ever holds the full weights.
    """
    import torch

    loaders, config = _loader_and_config(path, kind, pad_token_id)
    with torch.device("meta"), quiet_loading():
        return loaders[kind].from_config(config, dtype=dtype)


def load_model(
    path: str | Path,
    kind: ModelKind,
    dtype: torch.dtype,
    *,
    pad_token_id: int | None = None,
    frozen_role: str | None = None,
) -> PreTrainedModel:
    """Load the model of ``kind`` from the local directory ``path`` (weights in ``dtype``).

    ``frozen_role`` names a scorer that never trains (``reward``, ``cost``): a head it
    lacks would score at random for the whole run, so that is a warning, not a note.
    """
    loaders, config = _loader_and_config(path, kind, pad_token_id)
    with quiet_loading():
        model, info = loaders[kind].from_pretrained(
            str(path), config=config, dtype=dtype, output_loading_info=True
        )
    # A value or score head is new on a causal LM's weights: Llama-style models call it
    # `score`, GPT-2-style token classifiers `classifier`.
    heads = ("score.", "classifier.") if kind != "causal_lm" else ()
    missing = info.get("missing_keys", ())
    fresh = sorted(k for k in missing if k.startswith(heads))
    if fresh and frozen_role is not None:
        log.warning(
            "%s.model.model_path=%s has no trained score head (%s starts at random, a causal "
            "LM?): its scores are random; point it at a trained reward model "
            "(a reward_model run's checkpoints/step_N/reward_model_hf)",
            frozen_role,
            path,
            ", ".join(fresh),
        )
    elif fresh:
        log.info("%s head from %s starts untrained (%s)", kind, path, ", ".join(fresh))
    others = sorted(k for k in missing if not (heads and k.startswith(heads)))
    if others:
        log.warning("weights missing from %s, initialised at random: %s", path, others)
    if kind == "sequence_score" and not hasattr(model, "score"):
        # The scorer reads the head's output at the last token through a hook on `score`;
        # a critic reads the token classifier's logits, whatever its head is called.
        raise HfsdkError(
            f"{type(model).__name__} has no 'score' head; the fsdp backend reads scores from "
            "the 'score' layer that Llama/Qwen/Mistral/GPT-2-style sequence classifiers have"
        )
    return model
