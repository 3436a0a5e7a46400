"""Importing a user's ``path/to/file.py`` once, for the ``file.py:name`` references.

Tools, environments and gateway agents may each be named by a file path; the
import mechanics are shared here, and each caller words its own error.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def import_file(path: Path, prefix: str) -> ModuleType:
    """``path`` imported as a module, once per process (kept in ``sys.modules``).

    The module's name is ``prefix`` and a hash of the resolved path, so two files
    of the same name stay apart. Whatever the import raises propagates, and the
    half-imported module is forgotten so that a fixed file is read again.
    """
    name = f"{prefix}{abs(hash(str(path.resolve())))}"
    module = sys.modules.get(name)
    if module is not None:
        return module
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception:
        del sys.modules[name]
        raise
    return module
