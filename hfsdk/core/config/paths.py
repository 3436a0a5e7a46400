"""Path-valued config fields: a relative path that exists is recorded absolute, so a run's
config.yaml names the same files from any directory (replay, export, a resume)."""

from __future__ import annotations

import os
from typing import Any


def absolute_if_exists(value: Any) -> Any:
    """A relative path that exists made absolute, else as given (a hub name; a missing file is
    its loader's error); each item of a list or mapping; the file of ``dir/f.py:name``."""
    if isinstance(value, dict):  # a recorded config.yaml's section (the resume check)
        return {key: absolute_if_exists(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(map(absolute_if_exists, value))
    file, _, name = value.rpartition(":") if isinstance(value, str) else ("", "", "")
    if file.endswith(".py"):  # a function spec: its file only
        return f"{absolute_if_exists(file)}:{name}"
    if isinstance(value, str) and not os.path.isabs(value) and os.path.exists(value):
        return os.path.abspath(value)
    return value


def absolute_file_spec(value: Any) -> Any:
    """``dir/f.py:name`` with its file made absolute; a registered name or ``module:name`` as
    given, even where a file of that name exists here."""
    file = value.rpartition(":")[0] if isinstance(value, str) else ""
    return absolute_if_exists(value) if file.endswith(".py") else value
