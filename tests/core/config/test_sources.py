"""Where each config value came from (``config show --explain``, ``config_sources.yaml``) and
the one line a run prints when it drops the built-in task's preset."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from hfsdk.core.cli.main import main
from hfsdk.core.config.sources import ConfigLayers


def _hfsdk(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(list(args))
    out, err = capsys.readouterr()
    return int(info.value.code or 0), out, err


def test_explain_one_key_names_the_preset(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _hfsdk(
        capsys, "config", "show", "--algo", "grpo", "--explain", "actor.optim.lr"
    )
    assert code == 0, err
    lines = out.strip().splitlines()
    assert lines[0].startswith("actor.optim.lr: 0.0001   (from: task preset")
    assert "default: 1e-05" in lines[0] and len(lines) == 2  # the key and its help
    code, _out, err = _hfsdk(capsys, "config", "show", "--algo", "grpo", "--explain", "actor.optim")
    assert code == 0 and "actor.optim.betas" in _out and "data." not in _out
    code, _, err = _hfsdk(
        capsys, "config", "show", "--algo", "grpo", "--explain", "actor.optim.learning_rate"
    )
    assert code == 2 and "did you mean 'actor.optim.lr'?" in err


def test_own_data_on_the_built_in_model_says_the_preset_is_dropped(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = tmp_path / "train.jsonl"
    data.write_text('{"prompt": "1 + 1 =", "answer": "2"}\n')
    code, out, err = _hfsdk(
        capsys, "config", "show", "--algo", "grpo", "--explain", "actor.optim.lr",
        f"data.train_files={data}",
    )  # fmt: skip
    assert code == 0, err
    notes = [line for line in err.splitlines() if line.startswith("note: ")]
    assert len(notes) == 1
    assert "data.train_files is set, so the built-in task's preset for grpo (" in notes[0]
    assert "actor.optim.lr=0.0001" in notes[0] and "rollout.max_response_length=8" in notes[0]
    assert out.startswith("actor.optim.lr: 1e-05   (from: default; default: 1e-05)")
    # With a model of one's own there is no preset to drop.
    layers = ConfigLayers.read("grpo", None, [f"data.train_files={data}", "actor.model_path=/m"])
    assert layers.dropped_preset() is None
    assert ConfigLayers.read("grpo").dropped_preset() is None


def test_every_layer_is_named(tmp_path: Path) -> None:
    plain = tmp_path / "run.yaml"
    plain.write_text(yaml.safe_dump({"actor": {"optim": {"lr": 2e-5}}, "trainer": {"seed": 3}}))
    imported = tmp_path / "imported.yaml"
    imported.write_text(
        "# hfsdk run config imported from verl by hfsdk config import\n"
        + yaml.safe_dump({"actor": {"optim": {"lr": 3e-5}}})
    )
    sources = ConfigLayers.read(
        "grpo", str(plain), ["trainer.seed=7", "placement.pools={global: {devices: 1}}"]
    ).sources()
    assert sources["actor.optim.lr"] == f"file {plain}"
    assert sources["trainer.seed"] == "command line"
    assert sources["placement.pools.global.devices"] == "command line"
    assert sources["rollout.max_response_length"].startswith("task preset")
    assert "actor.optim.eps" not in sources  # a default
    sources = ConfigLayers.read("grpo", str(imported)).sources()
    assert sources["actor.optim.lr"] == f"imported from verl ({imported})"
    base = {"actor": {"optim": {"lr": 1e-3}}}
    sources = ConfigLayers.read("grpo", None, [], base=base, task="tool_use").sources()
    assert sources["actor.optim.lr"] == "task (--task tool_use)"
    # The old trainer.wandb.* spelling is recorded under the key it sets (it said "default").
    plain.write_text(yaml.safe_dump({"trainer": {"wandb": {"project": "p", "mode": "online"}}}))
    sources = ConfigLayers.read("grpo", str(plain), ["wandb.mode=offline"]).sources()
    assert sources["wandb.project"] == f"file {plain}" and "trainer.wandb.project" not in sources
    assert sources["wandb.mode"] == "command line"  # wandb.* wins over the old spelling


def test_a_run_writes_config_sources(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import hfsdk.core.trainer.trainer as trainer_module

    class FakeTrainer:
        def __init__(self, config, run_dir, *, quiet):  # type: ignore[no-untyped-def]
            self.run_dir = run_dir

        def fit(self) -> list[dict]:
            return []

    monkeypatch.setattr(trainer_module, "Trainer", FakeTrainer)
    code, _, err = _hfsdk(capsys, "run", "--algo", "grpo", "--run-dir", str(tmp_path),
                          "actor.optim.eps=1e-6")  # fmt: skip
    assert code == 0, err
    written = yaml.safe_load((tmp_path / "config_sources.yaml").read_text())
    assert written["actor.optim.eps"] == "command line"
    assert written["actor.optim.lr"].startswith("task preset")
    assert "note:" not in err  # the default task keeps its preset


def test_algo_given_with_algo_is_from_algo_not_the_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The file says grpo, as --algo does: --explain named the file as the value's source."""
    config = tmp_path / "algo.yaml"
    config.write_text("algo: grpo\n")
    code, out, err = _hfsdk(
        capsys, "config", "show", "--algo", "grpo", "--config", str(config), "--explain"
    )
    assert code == 0, err
    (line,) = [line for line in out.splitlines() if line.startswith("algo:")]
    assert line == "algo: 'grpo'   (from: --algo)", line


def test_a_shown_config_read_back_prints_no_self_contradicting_note(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`config show --algo reward_model` read back said "data.train_files is set, so the
    preset (data.train_files=[...]) is not applied"."""
    code, out, err = _hfsdk(capsys, "config", "show", "--algo", "reward_model")
    assert code == 0, err
    shown = tmp_path / "rm.yaml"
    shown.write_text(out)
    code, _, err = _hfsdk(capsys, "config", "show", "--config", str(shown))
    assert code == 0 and "note:" not in err, err
    layers = ConfigLayers.read("reward_model", str(shown))
    assert layers.dropped_preset() is None


def test_data_max_prompt_length_set_through_the_rollout_key_names_that_layer() -> None:
    """rollout.max_prompt_length=40 becomes data.max_prompt_length=40, which --explain said
    came "from: default"."""
    sources = ConfigLayers.read("grpo", None, ["rollout.max_prompt_length=40"]).sources()
    assert sources["data.max_prompt_length"] == "command line (as rollout.max_prompt_length)"
    later = ["rollout.max_prompt_length=40", "data.max_prompt_length=40"]
    assert ConfigLayers.read("grpo", None, later).sources()["data.max_prompt_length"] == (
        "command line"
    )


def test_a_piped_config_is_read_once(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A pipe (``--config /dev/stdin``) was read up to three times, later reads empty: --explain
    named the default as the source and --task then found no algorithm."""
    import os
    import threading

    fifo = tmp_path / "config.fifo"
    os.mkfifo(fifo)
    done = threading.Event()

    def write() -> None:  # the text once, then empty as a drained pipe gives every later reader
        text = "algo: grpo\ntrainer:\n  total_steps: 3\n"
        while not done.is_set():
            with fifo.open("w") as handle:
                handle.write(text)
            text = ""

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        code, out, err = _hfsdk(
            capsys, "config", "show", "--task", "tool_use", "--config", str(fifo), "--explain",
            "trainer.total_steps", "algo",
        )  # fmt: skip
    finally:
        done.set()
        os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))  # lets a waiting writer end
        writer.join(5)
    assert code == 0, err
    assert f"trainer.total_steps: 3   (from: file {fifo};" in out
    assert f"algo: 'grpo'   (from: file {fifo})" in out
