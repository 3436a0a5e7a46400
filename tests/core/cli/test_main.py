"""The hfsdk command: version, plugins, list, config show, run validation, errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import hfsdk
from hfsdk.core.cli.main import main


def _hfsdk(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(list(args))
    out, err = capsys.readouterr()
    return int(info.value.code or 0), out, err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _hfsdk(capsys, "--version")
    assert code == 0 and hfsdk.__version__ in out


def test_plugins_json_lists_repo_plugins(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _hfsdk(capsys, "plugins", "--json")
    assert code == 0
    infos = {p["name"]: p for p in json.loads(out)}
    assert infos["grpo"]["distribution"] == "hfsdk-plugin-grpo"
    assert infos["grpo"]["status"] == "loaded"
    assert "hfsdk_register_algorithms" in infos["grpo"]["hooks"]
    assert "hfsdk_register_training_backends" in infos["backend_fsdp"]["hooks"]


def test_plugins_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _hfsdk(capsys, "plugins")
    assert code == 0
    assert "ppo  [loaded]  hfsdk-plugin-ppo 0.1.0" in out


def test_list_kinds(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _hfsdk(capsys, "list", "algorithms")
    assert code == 0
    line = next(line for line in out.splitlines() if line.startswith("grpo"))
    assert "[grpo]" in line and "GRPO" in line
    code, out, _ = _hfsdk(capsys, "list", "training-backends")
    assert code == 0 and "fsdp" in out and "megatron" in out


def test_list_rollout_corrections(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _hfsdk(capsys, "list", "rollout-corrections")
    assert code == 0
    names = {line.split()[0] for line in out.splitlines() if line.strip()}
    assert {"tis", "mis", "icepop", "geo_rs", "k3_rs", "trust_region", "dsv32_mask"} <= names
    assert "[rollout_corrections]" in out  # the standard ones are that plugin's


def test_list_unknown_kind_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = _hfsdk(capsys, "list", "algoritms")
    assert code == 2
    assert err.strip().count("\n") == 0
    assert "did you mean 'algorithms'" in err and "Traceback" not in err


def test_run_unknown_algorithm_exits_2_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = _hfsdk(capsys, "run", "--algo", "nope")
    assert code == 2
    assert err.strip() == (
        "Error: config key 'algo': unknown algorithm 'nope'; available: dapo, distill, distill_multi, dpo, grpo, ppo, remax, reward_model, safe_rlhf, sft"
    )


def test_debug_shows_the_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _hfsdk(capsys, "--debug", "run", "--algo", "nope")
    assert code == 2 and "Traceback (most recent call last)" in err


def test_debug_after_the_subcommand_shows_the_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # errors.debug_requested says "--debug anywhere"; click knew it only before the subcommand.
    code, _, err = _hfsdk(capsys, "run", "--algo", "nope", "--debug")
    assert code == 2 and "No such option" not in err
    assert "unknown algorithm 'nope'" in err and "Traceback (most recent call last)" in err


def test_debug_as_an_options_value_stays_that_value(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _hfsdk(capsys, "config", "show", "--algo", "grpo", "--config", "--debug")
    assert code == 2 and "config file '--debug' does not exist" in err


def _command_plugin(word: str) -> object:
    import click

    class Plugin:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_register_commands(cli):  # type: ignore[no-untyped-def]
            cli.add_command(click.Command("reward", callback=lambda: click.echo(word)))
            cli.add_command(click.Command(f"only-{word}", callback=lambda: click.echo(word)))

    return Plugin


@pytest.mark.parametrize("owner_first", [True, False])
def test_a_command_name_clash_keeps_the_first_or_known_owner_and_drops_only_that_command(
    capsys: pytest.CaptureFixture[str], owner_first: bool
) -> None:
    import hfsdk.core.plugin_manager as plugin_manager

    owner, other = ("rewards", _command_plugin("owner")), ("zfake", _command_plugin("other"))
    plugins = [owner, other] if owner_first else [other, owner]
    manager = plugin_manager.build_plugin_manager(plugins, load_entry_points=False)
    manager.plugin_info("rewards").distribution = "hfsdk-plugin-rewards"  # type: ignore[union-attr]
    with pytest.MonkeyPatch.context() as patch:  # (undone before the fixtures' reset)
        patch.setattr(plugin_manager, "get_plugin_manager", lambda: manager)
        code, out, err = _hfsdk(capsys, "reward")
        # Before: the last registered won and the first (the rewards plugin) was marked failed.
        assert (code, out) == (0, "owner\n"), err
        assert "plugin 'zfake''s command 'hfsdk reward' is left out: plugin 'rewards' has" in err
        assert [p.status for p in manager.plugins] == ["loaded"] * 3
        assert _hfsdk(capsys, "only-other")[:2] == (0, "other\n")  # its other command stays


def test_config_show_applies_file_and_overrides(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import yaml

    path = tmp_path / "my.yaml"
    path.write_text("trainer:\n  total_steps: 7\nactor:\n  optim:\n    lr: 0.001\n")
    code, out, err = _hfsdk(
        capsys, "config", "show", "--algo", "grpo", "--config", str(path), "actor.optim.lr=1e-6"
    )
    assert code == 0, err
    shown = yaml.safe_load(out)
    assert shown["algo"] == "grpo"
    assert shown["trainer"]["total_steps"] == 7
    assert shown["actor"]["optim"]["lr"] == pytest.approx(1e-6)
    assert shown["algorithm"]["advantage_estimator"] == "grpo"


def test_config_show_bad_key(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _hfsdk(capsys, "config", "show", "--algo", "ppo", "actor.optim.lrr=1")
    assert code == 2
    assert "unknown config key 'actor.optim.lrr'; did you mean 'actor.optim.lr'?" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["trainer.loggers=[jsonl,", "tensorboard]"], "'tensorboard]' is not of the form"),
        (["reward.functions=[{name:", "exact_match,", "weight:", "1.0}]"], "'exact_match,'"),
    ],
)
def test_config_show_of_an_override_the_shell_split_says_to_quote_it(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, _, err = _hfsdk(capsys, "config", "show", "--algo", "grpo", *args)
    assert code == 2 and message in err
    assert "quote the whole override" in err and "--explain" not in err


@pytest.mark.parametrize(
    ("arg", "hint"),
    [("actor.optim.lr", "`hfsdk config show --explain actor.optim.lr`"), ("5%", "")],
)
def test_config_show_suggests_explain_only_for_a_key(
    capsys: pytest.CaptureFixture[str], arg: str, hint: str
) -> None:
    code, _, err = _hfsdk(capsys, "config", "show", "--algo", "grpo", arg)
    assert code == 2 and f"Error: {arg!r} is not of the form key.sub=value" in err
    assert (hint in err) if hint else "--explain" not in err


def test_missing_config_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = _hfsdk(capsys, "config", "show", "--algo", "ppo", "--config", "nope.yaml")
    assert code == 2 and "'nope.yaml' does not exist" in err


@pytest.mark.parametrize("args", [["--help"], ["plugins"]])
def test_help_and_plugins_do_not_import_torch_or_ray(args: list[str]) -> None:
    code = (
        "import sys\n"
        "from hfsdk.core.cli.main import main\n"
        "try:\n"
        f"    main({args!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = sorted(m for m in ('torch', 'ray', 'transformers') if m in sys.modules)\n"
        "print('HEAVY', heavy)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "HEAVY []"


@pytest.mark.parametrize(
    ("task", "algo"),
    [("shapes", "dpo"), ("frozen_lake", "reward_model"), ("frozen_lake", "dpo")],
)
def test_config_show_leaves_out_task_preset_keys_the_algorithm_has_no_use_for(
    capsys: pytest.CaptureFixture[str], task: str, algo: str
) -> None:
    code, out, err = _hfsdk(capsys, "config", "show", "--task", task, "--algo", algo)
    # Before: "algorithm.n_samples_per_prompt=8: algorithm 'dpo' never reads it ... remove it"
    # (or "unknown config key") for a key the task's preset set, not the user.
    assert code == 0, err
    assert "n_samples_per_prompt: 8" not in out
    args = ("config", "show", "--task", task, "--algo", "grpo")
    assert "n_samples_per_prompt: 8" in _hfsdk(capsys, *args)[1]  # still set where it is read


def test_config_show_still_refuses_the_users_own_unread_key(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ("--task", "frozen_lake", "--algo", "dpo", "algorithm.n_samples_per_prompt=8")
    code, _, err = _hfsdk(capsys, "config", "show", *args)
    assert code == 2 and "never reads it" in err


@pytest.mark.parametrize("address", ["[::1]:6379", "yes", "null"])
def test_run_passes_a_ray_address_as_the_string_it_is(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    address: str,
) -> None:
    import hfsdk.core.trainer.trainer as trainer_module

    seen = []

    class FakeTrainer:
        def __init__(self, config, run_dir, *, quiet):  # type: ignore[no-untyped-def]
            seen.append(config.trainer.ray_address)
            self.run_dir = run_dir

        def fit(self) -> list[dict]:
            return []

    monkeypatch.setattr(trainer_module, "Trainer", FakeTrainer)
    args = ("--algo", "grpo", "--run-dir", str(tmp_path), "--ray-address", address)
    code, _, err = _hfsdk(capsys, "run", *args)
    # Before: a YAML error ('[::1]:6379'), True ('yes'), or None: a local Ray instance ('null').
    assert (code, seen) == (0, [address]), err


def test_run_passes_ray_address_and_run_dir_to_the_trainer(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import hfsdk.core.trainer.trainer as trainer_module

    seen = {}

    class FakeTrainer:
        def __init__(self, config, run_dir, *, quiet):  # type: ignore[no-untyped-def]
            seen.update(config=config, run_dir=run_dir, quiet=quiet)
            self.run_dir = run_dir

        def fit(self) -> list[dict]:
            return [{"step": 1, "reward/mean": 0.25}, {"step": 2, "reward/mean": 0.75}]

    monkeypatch.setattr(trainer_module, "Trainer", FakeTrainer)
    code, out, err = _hfsdk(
        capsys,
        "run",
        "--algo",
        "grpo",
        "--ray-address",
        "10.1.2.3:6379",
        "--run-dir",
        str(tmp_path),
        "--quiet",
    )
    assert code == 0, err
    assert seen["config"].trainer.ray_address == "10.1.2.3:6379"
    assert seen["run_dir"] == str(tmp_path) and seen["quiet"] is True
    # Two steps: the first and the last, never overlapping "first 5 / last 5" windows.
    assert "reward/mean 0.250 (first) -> 0.750 (last)" in out


@pytest.mark.parametrize(
    ("rewards", "expected"),
    [
        ([0.5], "1 step in RUN; reward/mean 0.500"),
        ([0.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0], "0.333 (first 3) -> 1.000 (last 3)"),
        ([0.0] * 5 + [1.0] * 5 + [0.5] * 2, "0.000 (first 5) -> 0.800 (last 5)"),
    ],
)
def test_run_summary_windows_never_overlap(rewards: list[float], expected: str) -> None:
    from hfsdk.core.cli.run_command import run_summary

    rows = [{"step": i + 1, "reward/mean": r} for i, r in enumerate(rewards)]
    assert expected in run_summary("grpo", rows, "RUN")


def test_run_summary_leaves_the_validation_before_training_out() -> None:
    """``trainer.val_before_train`` logs step 0: 12 trained steps are 12, and the first
    window holds steps 1-5 (not the validation row and steps 1-4)."""
    from hfsdk.core.cli.run_command import run_summary

    rows = [{"step": 0, "val/reward_mean": 0.1}]
    rows += [{"step": i, "reward/mean": 0.0 if i <= 5 else 1.0} for i in range(1, 13)]
    line = run_summary("grpo", rows, "RUN")
    assert "12 steps in RUN" in line
    assert "0.000 (first 5) -> 1.000 (last 5)" in line


def test_run_summary_of_one_validation_names_it_once() -> None:
    """An SFT run validated once said "val/loss 2.000 (step 3) -> 2.000 (step 3)"."""
    from hfsdk.core.cli.run_command import run_summary

    rows = [{"step": i, "train/loss": 1.0} for i in (1, 2)] + [{"step": 3, "val/loss": 2.0}]
    assert run_summary("sft", rows, "RUN") == "sft: 3 steps in RUN; val/loss 2.000 (step 3)"
    rows.append({"step": 4, "val/loss": 1.5})
    assert run_summary("sft", rows, "RUN").endswith("val/loss 2.000 (step 3) -> 1.500 (step 4)")


def test_bare_list_lists_the_kinds(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _hfsdk(capsys, "list")
    assert code == 0, err
    assert "algorithms" in out and "reward-functions" in out and "Missing argument" not in err


def test_config_show_without_data_says_the_default_task_runs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Its ``reward.functions: []`` read as "scored by nothing": the run scores the default
    task's reward. The note goes to stderr, so the YAML on stdout stays loadable."""
    code, out, err = _hfsdk(capsys, "config", "show", "--algo", "grpo")
    assert code == 0 and "built-in default task" in err and "built-in" not in out
    code, out, err = _hfsdk(capsys, "config", "show", "--algo", "grpo", "data.train_files=[x]")
    assert code == 0 and "default task" not in err


def test_run_with_a_model_of_ones_own_and_no_data_says_the_default_task_runs(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Before: nothing said the user's model trained on the built-in addition prompts."""
    import hfsdk.core.trainer.trainer as trainer_module

    class FakeTrainer:
        def __init__(self, config, run_dir, *, quiet):  # type: ignore[no-untyped-def]
            self.run_dir = run_dir

        def fit(self) -> list[dict]:
            return []

    monkeypatch.setattr(trainer_module, "Trainer", FakeTrainer)
    args = ("run", "--algo", "grpo", "--run-dir", str(tmp_path), "actor.model_path=/m")
    code, _, err = _hfsdk(capsys, *args)
    assert code == 0 and "note: no data.train_files: `hfsdk run` trains on the built-in " in err
    assert "; actor.model_path is set: set data.train_files for your own data" in err
    code, _, err = _hfsdk(capsys, *args, "data.train_files=[x]")
    assert code == 0 and "default task" not in err


def test_config_show_explain_algo_prints_its_line(capsys: pytest.CaptureFixture[str]) -> None:
    """Plain --explain prints an `algo:` line, but --explain algo said "config has no key"."""
    code, out, err = _hfsdk(capsys, "config", "show", "--algo", "grpo", "--explain", "algo")
    assert code == 0, err
    assert out == "algo: 'grpo'   (from: --algo)\n"


def test_config_show_suggests_a_section_and_an_algorithm_in_another_case(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--explain trainr and --algo GRPO had no "did you mean" (leaf keys only, case counted)."""
    code, _, err = _hfsdk(capsys, "config", "show", "--algo", "grpo", "--explain", "trainr")
    assert code == 2 and "did you mean 'trainer'?" in err, err
    code, _, err = _hfsdk(capsys, "config", "show", "--algo", "GRPO")
    assert code == 2 and "did you mean 'grpo'?" in err, err
