"""The environments' third-party libraries, with one line when the extra is not installed."""

from __future__ import annotations

import importlib
from types import ModuleType

from hfsdk import HfsdkError


def require(module: str) -> ModuleType:
    """``import module``, or one line naming the extra that brings it."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise HfsdkError(
            f"{module.split('.')[0]} is not installed ({err}); install it with "
            "pip install 'hfsdk-plugin-agents[environments]' (make setup does)"
        ) from None
