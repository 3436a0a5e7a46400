"""Every config field explains itself; --explain and the docs read the same metadata."""

from __future__ import annotations

import attrs
import pytest
from click.testing import CliRunner

import hfsdk
from hfsdk.core.cli.main import cli
from hfsdk.core.config.help import field_help, help_field
from hfsdk.core.config.run_config import section_classes
from hfsdk.core.config.signal_config import SignalConfig

KINDS = (
    "algorithms",
    "advantage_estimators",
    "policy_losses",
    "value_losses",
    "training_backends",
    "rollout_backends",
    "reward_functions",
)


def missing_help(cls: type) -> list[str]:
    """Dotted names of the fields of ``cls`` that carry no help text."""
    return [f.name for f in field_help(cls) if not f.help.strip()]


def _config_classes() -> dict[str, type]:
    classes = {f"core {n}": c for n, c in section_classes().items()}
    classes["core signal"] = SignalConfig
    for kind in KINDS:
        for name, entry in hfsdk.get_registry(kind).items():
            if entry.config_cls is not None:
                classes[f"{kind} {name}"] = entry.config_cls
    return classes


def test_every_config_field_has_help_text() -> None:
    missing = {name: missing_help(cls) for name, cls in _config_classes().items()}
    assert not {k: v for k, v in missing.items() if v}


def test_help_is_inherited_by_fields_that_only_change_a_default() -> None:
    @attrs.frozen(kw_only=True)
    class Base:
        rate: float = help_field("How fast, in steps per second.", default=1.0)

    @attrs.frozen(kw_only=True)
    class Child(Base):
        rate: float = 2.0

    (item,) = field_help(Child)
    assert (item.help, item.default) == ("How fast, in steps per second.", "2.0")
    assert missing_help(Child) == []


@pytest.mark.parametrize("algo", ["ppo", "safe_rlhf"])
def test_config_show_explain_prints_values_and_meanings(algo: str) -> None:
    result = CliRunner().invoke(cli, ["config", "show", "--algo", algo, "--explain"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    at = lines.index("advantage.lam: 0.95   (from: default; default: 0.95)")
    assert "GAE" in lines[at + 1] and "λ" in lines[at + 1]
    # the preset's value, and that it is the preset's
    assert (
        "actor.optim.lr: 0.0001   (from: task preset (the built-in task's settings for this "
        "algorithm); default: 1e-05)" in lines
    )
    assert "(no help text)" not in result.output
