"""Finding a reward function: by registry name, ``module:function`` or ``file.py:function``."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import attrs

from hfsdk import HfsdkError, UnknownNameError
from hfsdk_rewards.call_styles import RewardStyles

REFERENCE_FORMS = (
    "a registered name (hfsdk list reward-functions), 'package.module:function' or "
    "'path/to/file.py:function'"
)

_FILE_MODULES: dict[Path, ModuleType] = {}
"""Modules loaded from files, by absolute path, so each file is executed once."""


@attrs.frozen(kw_only=True)
class ResolvedReward:
    """A reward function ready to call: what the user wrote, the callable, its config class."""

    reference: str
    fn: Callable[..., Any]
    config_cls: type | None = None
    columns: Callable[[Any], Sequence[str]] | None = None
    """``columns(config)``: the dataset columns a registered function reads (``columns=`` at
    registration), checked before a run starts and by ``hfsdk data inspect``."""


def is_file_reference(target: str) -> bool:
    """Whether the part before ``:`` names a Python file rather than a module."""
    return target.endswith(".py") or "/" in target or "\\" in target


def resolve_reward_function(
    reference: str, *, base_dir: str | Path | None = None
) -> ResolvedReward:
    """The reward function ``reference`` points to; an :class:`HfsdkError` says why not.

    Relative file paths are taken from ``base_dir`` (default: the working directory).
    """
    if not isinstance(reference, str) or not reference.strip():
        raise HfsdkError(
            f"reward function reference {reference!r} is empty; expected {REFERENCE_FORMS}"
        )
    target, sep, attr = reference.rpartition(":")
    if not sep:
        return _from_registry(reference)
    if not target or not attr:
        raise HfsdkError(
            f"reward function reference {reference!r} is incomplete; expected {REFERENCE_FORMS}"
        )
    if is_file_reference(target):
        module = _load_file(reference, target, base_dir)
    else:
        module = _import_module(reference, target)
    fn = getattr(module, attr, None)
    if fn is None:
        public = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        raise HfsdkError(
            f"reward function reference {reference!r}: {target!r} has no attribute {attr!r}; "
            f"callables there: {', '.join(public) or '(none)'}"
        )
    if not callable(fn):
        raise HfsdkError(
            f"reward function reference {reference!r}: {attr!r} is a {type(fn).__name__}, not a "
            "function; point to a function fn(prompts, responses, **columns)"
        )
    return ResolvedReward(reference=reference, fn=fn)


def _from_registry(name: str) -> ResolvedReward:
    import hfsdk

    try:
        entry = hfsdk.get_registry("reward_functions")[name]
    except UnknownNameError as exc:
        raise UnknownNameError(
            f"{exc}; or give 'package.module:function' or 'path/to/file.py:function'"
        ) from None
    return ResolvedReward(
        reference=name,
        fn=entry.impl,
        config_cls=entry.config_cls,
        columns=entry.extra.get("columns"),
    )


def registered_styles() -> RewardStyles:
    """The reward call styles the installed plugins registered, looked up as the registered
    functions are (:func:`_from_registry`)."""
    import hfsdk

    return RewardStyles.from_registry(hfsdk.get_registry("reward_styles"))


def _import_module(reference: str, target: str) -> ModuleType:
    try:
        return importlib.import_module(target)
    except ImportError as exc:
        raise HfsdkError(
            f"reward function reference {reference!r}: cannot import module {target!r} ({exc}); "
            "install its package or add its directory to PYTHONPATH"
        ) from exc
    except SystemExit as exc:  # no Exception: it would end the run quietly, with its status
        raise _exited(reference, f"module {target!r}", exc) from exc
    except Exception as exc:  # the module is found but broken (a syntax error, a raise)
        raise HfsdkError(
            f"reward function reference {reference!r}: importing module {target!r} raised "
            f"{type(exc).__name__}: {exc}"
        ) from exc


def _exited(reference: str, what: str, exc: SystemExit) -> HfsdkError:
    """The error for a reward module that called ``sys.exit()`` while it was imported."""
    return HfsdkError(
        f"reward function reference {reference!r}: importing {what} called "
        f"sys.exit({exc.code!r}) at import; expected it to define the function only (move "
        "script code under `if __name__ == '__main__':`)"
    )


def _load_file(reference: str, target: str, base_dir: str | Path | None) -> ModuleType:
    path = Path(target).expanduser()
    if not path.is_absolute():
        path = Path(base_dir or Path.cwd()) / path
    path = path.resolve()
    if path in _FILE_MODULES:
        return _FILE_MODULES[path]
    if not path.is_file():
        raise HfsdkError(
            f"reward function reference {reference!r}: file {str(path)!r} does not exist; "
            "give a path to a .py file (relative paths start at the working directory)"
        )
    # A unique, importable name keeps two files called rewards.py apart and lets pickle find it.
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:10]
    module_name = f"hfsdk_reward_file_{path.stem}_{digest}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise HfsdkError(
            f"reward function reference {reference!r}: cannot load {str(path)!r} as Python"
        )
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except SystemExit as exc:  # no Exception: it would end the run quietly, with its status
        del sys.modules[module_name]
        raise _exited(reference, repr(str(path)), exc) from exc
    except Exception as exc:
        del sys.modules[module_name]
        raise HfsdkError(
            f"reward function reference {reference!r}: running {str(path)!r} raised "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    _FILE_MODULES[path] = module
    return module
