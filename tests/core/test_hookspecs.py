"""Contract tests for the hook specifications."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from hfsdk import hookspecs

DOC = Path(__file__).resolve().parents[2] / "docs" / "plugin_hooks.md"


def _specs() -> dict[str, object]:
    return {
        name: obj
        for name, obj in vars(hookspecs).items()
        if name.startswith("hfsdk_") and callable(obj)
    }


def test_required_hooks_exist() -> None:
    required = {
        "hfsdk_addhooks",
        "hfsdk_register_algorithms",
        "hfsdk_register_advantage_estimators",
        "hfsdk_register_policy_losses",
        "hfsdk_register_value_losses",
        "hfsdk_register_kl_estimators",
        "hfsdk_register_reward_functions",
        "hfsdk_register_rollout_backends",
        "hfsdk_register_training_backends",
        "hfsdk_register_transfer_protocols",
        "hfsdk_register_commands",
        "hfsdk_validate_config",
    }
    assert required <= set(_specs())


def test_every_hook_is_prefixed_typed_and_has_a_docstring() -> None:
    for name, func in _specs().items():
        assert inspect.getdoc(func), f"{name} has no docstring"
        signature = inspect.signature(func)
        for param in signature.parameters.values():
            assert param.annotation is not inspect.Parameter.empty, f"{name}({param.name}) untyped"
        assert signature.return_annotation is not inspect.Signature.empty, f"{name} return untyped"


def test_addhooks_is_historic() -> None:
    opts = hookspecs.hfsdk_addhooks.hfsdk_spec  # type: ignore[attr-defined]
    assert opts["historic"] is True


def test_every_hook_is_documented_with_signature_and_example() -> None:
    text = DOC.read_text()
    sections = dict(re.findall(r"^## (hfsdk_\w+)\n(.*?)(?=^## |\Z)", text, flags=re.M | re.S))
    for name in _specs():
        assert name in sections, f"{name} is not documented in docs/plugin_hooks.md"
        body = sections[name]
        assert f"def {name}(" in body, f"{name}: the doc shows no signature"
        assert body.count("```python") >= 2, f"{name}: the doc needs a signature and an example"
    for name in sections:
        assert name in _specs(), f"docs/plugin_hooks.md documents {name}, which is not a hook"
