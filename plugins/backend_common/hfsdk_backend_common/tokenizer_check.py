"""Roles that read the policy's token ids must share its tokenizer, checked before a run.

A reference, a distillation teacher, a critic or a signal's scoring model (``reward.model``,
``cost.model``) gets the policy's token ids as they are: with another vocabulary each id names
another token (training toward nonsense, silently), or lies past the role's embeddings (an
``IndexError`` mid-step). Every backend loads the HF tokenizer next to the model, so the check
is the backends': the ``shared_tokenizer`` preflight check compares the tokenizer of each such
role that has a model directory of its own with the run's.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hfsdk import ConfigError, SignalConfig, load_tokenizer

ID_READING_KINDS = ("frozen_policy", "value")
"""Role kinds whose forward reads the policy's token ids (the reference, teachers, critics)."""


def _difference(ours: dict[str, int], theirs: dict[str, int]) -> str:
    by_id = sorted(ours.items(), key=lambda item: item[1])
    token = next((t for t, i in by_id if theirs.get(t) != i), None)
    if token is None:
        return f"{len(ours)} tokens against {len(theirs)}"
    there = "absent" if token not in theirs else f"id {theirs[token]}"
    return f"{token!r} is id {ours[token]} in the policy's and {there} in this one"


def _vocab_rows(model_path: str | None) -> int | None:
    """The vocabulary rows a model directory's ``config.json`` declares (its text model's, for
    a vision-language one); ``None`` when it does not say (the role's loader reports that)."""
    try:
        config = json.loads((Path(str(model_path)) / "config.json").read_text())
    except (OSError, ValueError):
        return None
    text = config.get("text_config") if isinstance(config, dict) else None
    rows = (text if isinstance(text, dict) else config).get("vocab_size")
    return rows if isinstance(rows, int) else None


def _check_rows(
    role: str, model_path: str | None, policy_rows: int | None, tokens: int
) -> str | None:
    """Refuse a role with fewer embedding rows than the tokenizer has tokens (the policy
    samples those ids; the role would index past its embeddings mid-step: an ``IndexError``,
    a device-side assert on GPU). Fewer rows than the policy only is a warning: a family's
    larger model pads its embeddings further (Qwen2.5-7B 152,064 rows, 0.5B-3B 151,936), and
    the ids past the tokenizer are ones a trained policy practically never samples."""
    rows = _vocab_rows(model_path)
    if rows is None:
        return None
    if rows < tokens:
        raise ConfigError(
            f"{role}.model_path ({model_path}) has {rows} embedding rows, fewer than the "
            f"tokenizer's {tokens} tokens: the policy can sample ids {role} has no embedding for; "
            f"give {role} a model with at least {tokens} rows"
        )
    if policy_rows is not None and rows < policy_rows:
        return (
            f"{role}.model_path ({model_path}) has {rows} embedding rows, the policy "
            f"{policy_rows}: a sampled id from {rows} up (past the tokenizer's {tokens} tokens; "
            f"a randomly initialised policy samples them) would stop the step in {role}"
        )
    return None


def _id_reading_sections(config: Any, spec: Any) -> Iterator[tuple[str, Any]]:
    """Each model section that reads the policy's token ids, by config key: the reference,
    teachers and critics, and each signal's scoring model (``reward.model``, which scores the
    policy's ids as they are, not the decoded text)."""
    for role in spec.role_names:
        section = getattr(config, role, None)
        if isinstance(section, SignalConfig):
            if section.model is not None:
                yield f"{role}.model", section.model
        elif spec.kind_of(role) in ID_READING_KINDS:
            yield role, section


def check_shared_tokenizer(config: Any, spec: Any, prepared: Any) -> str | None:
    """Refuse a reference, teacher, critic or scoring model whose tokenizer is not the
    policy's, or that has fewer embedding rows than the tokenizer has tokens; warn when it
    has fewer rows than the policy."""
    if not spec.has_policy:
        return None
    own = str(Path(prepared.assets.tokenizer_path).expanduser().resolve())
    policy_rows = _vocab_rows(getattr(prepared.assets, "model_path", None))
    tokens = len(prepared.tokenizer)
    vocab: dict[str, int] | None = None
    warnings: list[str] = []
    for role, section in _id_reading_sections(config, spec):
        field = "tokenizer_path" if getattr(section, "tokenizer_path", None) else "model_path"
        path, key = getattr(section, field, None), f"{role}.{field}"  # key: named in the errors
        if not path:
            continue
        model_path = getattr(section, "model_path", None)
        if str(Path(path).expanduser().resolve()) != own:
            vocab = vocab if vocab is not None else prepared.tokenizer.get_vocab()
            try:
                theirs = load_tokenizer(path).get_vocab()
            except Exception:  # no tokenizer to compare: at least every id must have a row
                rows = _vocab_rows(model_path)
                if rows is not None and rows < len(vocab):
                    raise ConfigError(
                        f"{key} ({path}) has no tokenizer that loads and {rows} vocabulary rows, "
                        f"fewer than the policy tokenizer's {len(vocab)} tokens: the policy's "
                        f"larger ids would fall past its embeddings; give {role} a model with the "
                        "policy's tokenizer (copy the tokenizer files in if it was trained with it)"
                    ) from None
                continue
            if theirs != vocab:
                raise ConfigError(
                    f"{key} ({path}) has another tokenizer than the policy "
                    f"({prepared.assets.tokenizer_path}): {_difference(vocab, theirs)}; {role} "
                    "reads the policy's token ids as they are, so give it a model with the same "
                    "tokenizer"
                )
        warning = _check_rows(role, model_path, policy_rows, tokens)
        if warning:
            warnings.append(warning)
    return "; ".join(warnings) or None
