"""A well-known plugin command whose plugin is missing, disabled or broken: one line naming
the distribution to install, exit 2, instead of click's "no such command"."""

from __future__ import annotations

import pytest

from hfsdk.core.cli import known_commands
from hfsdk.core.cli.main import main


def _hfsdk(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(list(args))
    out, err = capsys.readouterr()
    return int(info.value.code or 0), out, err


def test_config_import_with_the_migration_plugin_disabled_names_its_distribution(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HFSDK_DISABLE_PLUGINS", "migration")
    code, out, err = _hfsdk(capsys, "config", "import", "--from", "verl", "ppo.yaml")
    assert code == 2, out + err
    [line] = err.strip().splitlines()
    assert line.startswith("Error: `hfsdk config import` comes with hfsdk-plugin-migration")
    # disabled where the plugin is installed (make setup), else not installed
    assert "is disabled here; unset it in HFSDK_DISABLE_PLUGINS" in line or (
        "which is not installed; pip install hfsdk-plugin-migration" in line
    )
    assert "No such command" not in err and "Traceback" not in err
    code, _, err = _hfsdk(capsys, "data", "inspect", "train.parquet")
    assert code == 2 and "`hfsdk data` comes with hfsdk-plugin-migration" in err
    # `config show` is the core's and stays
    code, out, err = _hfsdk(capsys, "config", "show", "--algo", "grpo")
    assert code == 0, err
    assert "algo: grpo" in out


def test_a_command_of_a_plugin_not_installed_says_what_to_install(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(known_commands.KNOWN_COMMANDS, ("config", "lint"), "hfsdk-plugin-lint")
    code, out, err = _hfsdk(capsys, "config", "lint", "run.yaml")
    assert code == 2, out + err
    assert err.strip() == (
        "Error: `hfsdk config lint` comes with hfsdk-plugin-lint, which is not installed; "
        "pip install hfsdk-plugin-lint"
    )
    # a command nobody knows is still click's usage error
    code, _, err = _hfsdk(capsys, "config", "frobnicate")
    assert code == 2 and "No such command 'frobnicate'" in err


def test_a_command_of_a_broken_plugin_says_why_it_failed(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from hfsdk.core.plugin_manager import PluginInfo, get_plugin_manager

    broken = PluginInfo(
        name="lint",
        distribution="hfsdk-plugin-lint",
        version="0.1.0",
        status="failed",
        error="ImportError: cannot import name 'x'\nmore lines",
    )
    monkeypatch.setattr(get_plugin_manager(), "plugins", [*get_plugin_manager().plugins, broken])
    monkeypatch.setitem(known_commands.KNOWN_COMMANDS, ("lint",), "hfsdk-plugin-lint")
    code, out, err = _hfsdk(capsys, "lint", "run.yaml")
    assert code == 2, out + err
    assert err.strip() == (
        "Error: `hfsdk lint` comes with hfsdk-plugin-lint, whose plugin 'lint' failed to load "
        "(ImportError: cannot import name 'x'); reinstall it (pip install --force-reinstall "
        "hfsdk-plugin-lint)"
    )


def test_a_plugin_whose_commands_raise_is_dropped_alone_and_one_taking_a_name_loses_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import click

    import hfsdk
    from hfsdk.core.plugin_manager import PluginInfo, get_plugin_manager

    class Raises:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_register_commands(cli):  # type: ignore[no-untyped-def]
            raise RuntimeError("boom in commands hook")

    class Hijacks:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_register_commands(cli):  # type: ignore[no-untyped-def]
            cli.add_command(click.Command("hello", callback=lambda: None))  # kept: no clash
            cli.add_command(click.Command("plugins", callback=lambda: click.echo("HIJACKED")))

    manager = get_plugin_manager()
    for name, plugin in (("raises", Raises), ("hijacks", Hijacks)):
        manager.pm.register(plugin, name=name)
        manager.plugins.append(
            PluginInfo(name=name, distribution=None, version=None, status="loaded")
        )
    # Before: every command, `plugins` and `--help` too, was an internal error; or `plugins`
    # printed HIJACKED.
    code, out, err = _hfsdk(capsys, "plugins")
    assert code == 0 and "HIJACKED" not in out, err
    assert "plugin 'raises' failed in hfsdk_register_commands raised RuntimeError: boom" in err
    assert "plugin 'hijacks''s command 'hfsdk plugins' is left out: the core has" in err
    code, out, err = _hfsdk(capsys, "--help")
    assert code == 0 and "hello" in out and "run" in out
