"""The algorithm-spec example of ``docs/plugin_hooks.md``, run as written.

A spec built from ``GRPO_SPEC`` (imported from ``hfsdk_grpo.spec``) with a
``summary`` of its own is listed by ``hfsdk list algorithms`` with that line,
not GRPO's; without one it would be listed with GRPO's program docstring.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import attrs
import pytest
from click.testing import CliRunner

import hfsdk
from hfsdk.core.cli.main import cli
from hfsdk.core.config import load_run_config
from hfsdk.core.plugin_manager import get_plugin_manager, reset_plugin_manager
from hfsdk_grpo.spec import GRPO_SPEC

DOC = Path(__file__).resolve().parents[3] / "docs" / "plugin_hooks.md"
FIRST_LINE = "# my_pkg/spec.py"


def _doc_spec() -> Any:
    blocks = re.findall(r"^```python\n(.*?)^```", DOC.read_text(), re.M | re.S)
    (source,) = [block for block in blocks if block.startswith(FIRST_LINE + "\n")]
    namespace: dict[str, Any] = {}
    exec(compile(source, f"{DOC}::{FIRST_LINE}", "exec", dont_inherit=True), namespace)
    return namespace["MY_SPEC"]


@pytest.fixture(autouse=True)
def _own_plugin_manager() -> Any:
    """The example's plugin is registered for this test only."""
    reset_plugin_manager()
    yield
    reset_plugin_manager()


def _register(*specs: Any) -> None:
    class Plugin:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_register_algorithms(register: Any) -> None:
            for spec in specs:
                register(spec.name, spec)

    get_plugin_manager().pm.register(Plugin, name="spec_example")


def _listed() -> dict[str, str]:
    result = CliRunner().invoke(cli, ["list", "algorithms"])
    assert result.exit_code == 0, result.output
    lines = (line.split(None, 1) for line in result.output.splitlines() if line.strip())
    return {name: rest.rsplit("  [", 1)[0].strip() for name, rest in lines}


def test_a_spec_built_from_grpo_is_listed_with_its_own_summary() -> None:
    spec = _doc_spec()
    unnamed = attrs.evolve(spec, name="grpo_unsummarised", summary=None)
    _register(spec, unnamed)
    listed = _listed()
    assert listed["grpo_short"] == "GRPO with 4-token responses on the default task."
    assert listed["grpo_unsummarised"] == listed["grpo"] != listed["grpo_short"]
    assert spec.program is GRPO_SPEC.program
    config = load_run_config("grpo_short", None, [])
    assert config.rollout.max_response_length == 4
