"""Resolving reward functions: registry names, module:function, file.py:function."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfsdk.core.errors import HfsdkError
from hfsdk_rewards.loading import resolve_reward_function

SOURCE = """
def shout(prompts, responses, **columns):
    return [float(r.isupper()) for r in responses]

NOT_A_FUNCTION = 3
"""


def test_unknown_name_lists_names_and_the_other_forms() -> None:
    with pytest.raises(HfsdkError, match=r"did you mean 'exact_match'.*module:function"):
        resolve_reward_function("exact_mach")


def test_module_reference(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "my_user_rewards.py").write_text(SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    resolved = resolve_reward_function("my_user_rewards:shout")
    assert resolved.fn([""] * 2, ["YES", "no"]) == [1.0, 0.0]
    assert resolved.config_cls is None


def test_file_reference_relative_and_absolute(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    path = tmp_path / "sub" / "rewards.py"
    path.write_text(SOURCE)
    relative = resolve_reward_function("sub/rewards.py:shout", base_dir=tmp_path)
    absolute = resolve_reward_function(f"{path}:shout")
    assert relative.fn is absolute.fn  # the file is executed once
    assert relative.fn([""], ["OK"]) == [1.0]


def test_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "r.py").write_text(SOURCE)
    (tmp_path / "broken.py").write_text("raise RuntimeError('boom')\n")
    with pytest.raises(HfsdkError, match="has no attribute 'nope'; callables there: shout"):
        resolve_reward_function(f"{tmp_path}/r.py:nope")
    with pytest.raises(HfsdkError, match="'NOT_A_FUNCTION' is a int, not a function"):
        resolve_reward_function(f"{tmp_path}/r.py:NOT_A_FUNCTION")
    with pytest.raises(HfsdkError, match="does not exist"):
        resolve_reward_function(f"{tmp_path}/missing.py:shout")
    with pytest.raises(HfsdkError, match="raised RuntimeError: boom"):
        resolve_reward_function(f"{tmp_path}/broken.py:f")
    with pytest.raises(HfsdkError, match="cannot import module 'no_such_module_xyz'"):
        resolve_reward_function("no_such_module_xyz:f")
    # A module found but broken: before, an internal error (only ImportError was caught).
    (tmp_path / "bad_syntax_rw.py").write_text("def f(:\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(HfsdkError, match="importing module 'bad_syntax_rw' raised SyntaxError"):
        resolve_reward_function("bad_syntax_rw:f")
    with pytest.raises(HfsdkError, match="incomplete"):
        resolve_reward_function("module:")


@pytest.mark.parametrize("form", ["file", "module"])
def test_a_reward_file_that_exits_at_import_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, form: str
) -> None:
    # SystemExit is no Exception: it used to end `hfsdk run` with exit 0 and no output.
    (tmp_path / "exits_at_import_rw.py").write_text("import sys\nsys.exit(0)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    reference = f"{tmp_path}/exits_at_import_rw.py:f" if form == "file" else "exits_at_import_rw:f"
    with pytest.raises(HfsdkError, match=r"called sys.exit\(0\) at import; "):
        resolve_reward_function(reference)
