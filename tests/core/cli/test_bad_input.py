"""Bad input to ``hfsdk run``: one line, a non-zero exit, no traceback, no litter, no Ray.

Each case builds its input under ``tmp_path``, runs the CLI in-process, and
checks that stderr is exactly one line matching what the case is about, that
the exit status is non-zero, that no run directory was left behind (or a
pre-existing one gained nothing but its lock file), and that Ray was never
started: ``ray.init`` is replaced by a function that fails the case loudly.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from hfsdk.core.cli.main import main

BASE = ("--algo", "grpo", "--quiet", "trainer.total_steps=2")


def _base_config_yaml() -> str:
    from hfsdk.core.config import load_run_config

    return load_run_config("grpo", None, ["trainer.total_steps=2"]).to_yaml()


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _data(tmp: Path) -> Path:
    return _jsonl(tmp / "data.jsonl", [{"prompt": "1 + 1 =", "answer": "2"}] * 4)


def _per_sample_reward(tmp: Path) -> Path:
    """A per-sample function under hfsdk's batch convention; verl data's 'prompt' collides."""
    path = tmp / "rw.py"
    path.write_text("def per_sample(prompt, response, answer):\n    return 0.0\n")
    return path


def _unknown_words(tmp: Path) -> Path:
    """Prompts of words the built-in word-level tokenizer never saw."""
    return _jsonl(tmp / "words.jsonl", [{"prompt": "Tom has many cards", "answer": "2"}] * 4)


def _checkpoint_run(tmp: Path, damage: Callable[[Path], None]) -> Path:
    """A run dir with the base config and one checkpoint at step 1, then ``damage(step_dir)``."""
    import torch

    from hfsdk.core.trainer.checkpoint import write_checkpoint

    run = tmp / "run"
    run.mkdir()
    (run / "config.yaml").write_text(_base_config_yaml())

    def save(directory: Path) -> None:
        (directory / "actor").mkdir()
        (directory / "actor" / "actor_engine.pt").write_bytes(b"x" * 1000)
        torch.save(
            {"step": 1, "data": {}, "algorithm": {}, "rng": {}}, directory / "trainer_state.pt"
        )

    damage(write_checkpoint(run, 1, save))
    return run


def _empty_dir(tmp: Path) -> str:
    (tmp / "empty").mkdir()
    return str(tmp / "empty")


def _model_dir_without_config(tmp: Path) -> str:
    import shutil

    from hfsdk import default_task_assets

    # A tokenizer-only directory: the tokenizer loads, the model cannot.
    shutil.copytree(default_task_assets().tokenizer_dir, tmp / "model")
    return str(tmp / "model")


def _reward_file(tmp: Path, body: str) -> str:
    (tmp / "my_reward.py").write_text(body)
    return str(tmp / "my_reward.py")


def _yaml(tmp: Path, text: str) -> str:
    (tmp / "cfg.yaml").write_text(text)
    return str(tmp / "cfg.yaml")


def _locked_run(tmp: Path) -> Path:
    from hfsdk.core.trainer.run_lock import RunDirLock

    run = tmp / "run"
    run.mkdir()
    lock = RunDirLock(run)
    lock.acquire()  # another open file: conflicts like another process would
    _HELD.append(lock)
    return run


_HELD: list = []

# Cases whose bad input is in the environment.
ENV = {
    "ray-address-env-unreachable": {"RAY_ADDRESS": "127.0.0.1:1"},
    "algo-plugin-disabled": {"HFSDK_DISABLE_PLUGINS": "grpo"},
    "tasks-plugin-disabled": {"HFSDK_DISABLE_PLUGINS": "tasks"},
    "tracking-plugin-disabled": {"HFSDK_DISABLE_PLUGINS": "tracking"},
    "pipelines-plugin-disabled": {"HFSDK_DISABLE_PLUGINS": "pipelines"},
    "virtual-devices-text": {"HFSDK_VIRTUAL_DEVICES": "many"},
}

# (id, args built from tmp_path, regex the one line must match); "{run}" is the run dir.
Case = tuple[str, Callable[[Path], list[str]], str]
CASES: list[Case] = [
    # -- the command line and the config
    ("unknown-algo", lambda t: ["--algo", "nope"], r"algo.*nope"),
    ("no-algo", lambda t: [], r"no algorithm given"),
    ("lr-inf", lambda t: [*BASE, "actor.optim.lr=.inf"], r"actor\.optim\.lr.*finite"),
    ("lr-nan", lambda t: [*BASE, "actor.optim.lr=nan"], r"actor\.optim\.lr.*finite"),
    ("lr-neg-inf", lambda t: [*BASE, "actor.optim.lr=-.inf"], r"actor\.optim\.lr.*finite"),
    ("kl-coef-inf", lambda t: [*BASE, "algorithm.kl_coef=inf"], r"algorithm\.kl_coef.*finite"),
    ("lr-negative", lambda t: [*BASE, "actor.optim.lr=-1"], r"actor\.optim\.lr"),
    ("lr-text", lambda t: [*BASE, "actor.optim.lr=abc"], r"actor\.optim\.lr.*'abc'"),
    ("steps-zero", lambda t: [*BASE, "trainer.total_steps=0"], r"trainer\.total_steps"),
    ("steps-fraction", lambda t: [*BASE, "trainer.total_steps=1.5"], r"trainer\.total_steps"),
    ("unknown-section", lambda t: [*BASE, "foo.bar=1"], r"unknown config section 'foo'"),
    ("unknown-key", lambda t: [*BASE, "actor.optimm.lr=1"], r"actor\.optimm.*did you mean"),
    ("bad-logger", lambda t: [*BASE, "trainer.loggers=[nope]"], r"logger 'nope'"),
    (
        "minibatch-not-divisible",
        lambda t: [*BASE, "actor.mini_batch_size=7", "placement.pools.global.devices=2"],
        r"actor\.mini_batch_size=7 is not divisible by the 2 devices",
    ),
    ("unknown-pool", lambda t: [*BASE, "placement.roles.actor=gpu9"], r"pool 'gpu9'"),
    ("bad-colocation", lambda t: [*BASE, "placement.colocation=weird"], r"placement\.colocation"),
    (
        "unknown-estimator",
        lambda t: [*BASE, "algorithm.advantage_estimator=nope"],
        r"algorithm\.advantage_estimator",
    ),
    ("unknown-rollout", lambda t: [*BASE, "rollout.backend=nope"], r"rollout\.backend"),
    ("unknown-backend", lambda t: [*BASE, "actor.backend=nope"], r"actor\.backend"),
    ("override-no-equals", lambda t: [*BASE, "actor.optim.lr"], r"actor\.optim\.lr"),
    ("config-missing", lambda t: [*BASE, "--config", str(t / "no.yaml")], r"no\.yaml"),
    ("config-bad-yaml", lambda t: [*BASE, "--config", _yaml(t, "a: [1,\n")], r"cfg\.yaml"),
    ("config-list", lambda t: [*BASE, "--config", _yaml(t, "- 1\n- 2\n")], r"cfg\.yaml|mapping"),
    ("rollout-n", lambda t: [*BASE, "rollout.n=2"], r"rollout\.n=2"),
    ("device-tpu", lambda t: [*BASE, "trainer.device=tpu"], r"trainer\.device"),
    ("batch-zero", lambda t: [*BASE, "data.batch_size=0"], r"data\.batch_size"),
    ("betas-one", lambda t: [*BASE, "actor.optim.betas=[0.9]"], r"betas"),
    ("resume-flag-text", lambda t: [*BASE, "trainer.resume=maybe"], r"trainer\.resume"),
    # -- data
    (
        "data-missing",
        lambda t: [*BASE, f"data.train_files=[{t / 'nope.jsonl'}]"],
        r"nope\.jsonl' does not exist",
    ),
    (
        "data-string-missing",  # one path as a string is one path, not its characters
        lambda t: [*BASE, f"data.train_files={t / 'nope.jsonl'}"],
        r"'/.*nope\.jsonl' does not exist",
    ),
    (
        "data-empty",
        lambda t: [*BASE, f"data.train_files={_jsonl(t / 'e.jsonl', [])}"],
        r"e\.jsonl.*empty",
    ),
    (
        "data-no-prompt-column",
        lambda t: [*BASE, f"data.train_files={_jsonl(t / 'q.jsonl', [{'question': 'x'}])}"],
        r"no column 'prompt'",
    ),
    (
        "data-csv",
        lambda t: [*BASE, f"data.train_files={(t / 'd.csv').write_text('a') and t / 'd.csv'}"],
        r"unknown format",
    ),
    (
        "data-prompts-too-long",
        lambda t: [*BASE, f"data.train_files={_data(t)}", "data.max_prompt_length=1"],
        r"data\.max_prompt_length=1",
    ),
    (
        "data-unreadable-by-the-tokenizer",
        lambda t: [*BASE, f"data.train_files={_unknown_words(t)}"],
        r"\d+% of the prompt tokens \(column 'prompt'\) are unknown to the tokenizer .*built-in "
        r"model's word-level tokenizer.*actor\.model_path",
    ),
    (
        "reward-signature-collides",
        lambda t: [
            *BASE,
            f"data.train_files={_data(t)}",
            f"reward.functions=[{{name: {_per_sample_reward(t)}:per_sample}}]",
        ],
        r"its parameter 'prompt' receives the prompts .* the dataset's column 'prompt' is "
        r"passed by keyword too; expected fn\(prompts, responses, \*\*columns\)",
    ),
    # -- model directories
    (
        "model-path-missing",
        lambda t: [*BASE, f"actor.model_path={t / 'absent'}"],
        r"actor\.model_path=.*absent' does not exist; point it at a local model directory",
    ),
    (
        "model-dir-no-config",
        lambda t: [*BASE, f"actor.model_path={_model_dir_without_config(t)}"],
        r"actor\.model_path=.*no config\.json",
    ),
    (
        "model-dir-empty",
        lambda t: [*BASE, f"actor.model_path={_empty_dir(t)}"],
        r"actor\.model_path=.*' has no tokenizer files .* or set actor\.tokenizer_path=DIR",
    ),
    (
        "model-path-file",
        lambda t: [*BASE, f"actor.model_path={_data(t)}"],
        r"actor\.model_path=.*data\.jsonl' is not a directory",
    ),
    (
        "reference-model-missing",
        lambda t: [*BASE, f"reference.model_path={t / 'absent'}"],
        r"reference\.model_path=",
    ),
    (
        "tokenizer-path-missing",
        lambda t: [*BASE, f"actor.tokenizer_path={t / 'absent'}"],
        r"actor\.tokenizer_path=.*absent' does not exist",
    ),
    # -- reward functions (checked before Ray, not after the workers start)
    ("reward-unknown", lambda t: [*BASE, "reward.functions=[{name: nope}]"], r"nope"),
    (
        "reward-file-missing-fn",
        lambda t: [*BASE, f"reward.functions=[{{name: '{_reward_file(t, 'x = 1')}:score'}}]"],
        r"score",
    ),
    (
        "reward-file-raises",
        lambda t: [
            *BASE,
            f"reward.functions=[{{name: '{_reward_file(t, 'raise ValueError(1)')}:f'}}]",
        ],
        r"my_reward\.py.*raised",
    ),
    # -- Ray
    (
        "ray-unreachable",
        lambda t: [*BASE, "--ray-address", "127.0.0.1:1"],
        r"127\.0\.0\.1:1' is unreachable",
    ),
    ("ray-garbage-address", lambda t: [*BASE, "--ray-address", "nonsense"], r"not HOST:PORT"),
    ("ray-address-env-unreachable", lambda t: list(BASE), r"127\.0\.0\.1:1' is unreachable"),
    # -- plugins and the environment
    ("algo-plugin-disabled", lambda t: list(BASE), r"algo.*'grpo'"),
    (
        "tasks-plugin-disabled",
        lambda t: list(BASE),
        r"no task 'default' is registered .*install hfsdk-plugin-tasks",
    ),
    (
        "tracking-plugin-disabled",
        lambda t: [*BASE, "trainer.loggers=[tensorboard]"],
        r"trainer\.loggers=tensorboard comes with hfsdk-plugin-tracking, whose plugin 'tracking' "
        r"is disabled",
    ),
    (
        "pipelines-plugin-disabled",
        lambda t: [*BASE, "trainer.pipeline=one_step_off"],
        r"trainer\.pipeline=one_step_off comes with hfsdk-plugin-pipelines",
    ),
    (
        "unknown-task",
        lambda t: [*BASE, "--task", "nope"],
        r"unknown task 'nope'; available: default, .*tool_use",
    ),
    ("virtual-devices-text", lambda t: list(BASE), r"HFSDK_VIRTUAL_DEVICES='many'"),
    # -- the run directory
    (
        "run-dir-is-file",
        lambda t: [*BASE, "--run-dir", str(_data(t))],
        r"is a file, not a directory",
    ),
    (
        "run-dir-under-file",
        lambda t: [*BASE, "--run-dir", str(_data(t) / "sub")],
        r"is a file, not a directory",
    ),
    (
        "run-dir-in-use",
        lambda t: [*BASE, "--run-dir", str(_locked_run(t))],
        rf"in use by another hfsdk run \(pid {os.getpid()}\)",
    ),
    (
        "resume-changed-config",
        lambda t: [
            *BASE,
            "actor.optim.lr=0.5",
            "--run-dir",
            str(_checkpoint_run(t, lambda d: None)),
        ],
        r"different config \(actor\.optim\.lr changed\)",
    ),
    (
        # A fresh start beside an earlier run's checkpoints: a worker restart resumed from
        # them, and `hfsdk export` exported them, as this run's.
        "fresh-start-beside-checkpoints",
        lambda t: [
            *BASE,
            "trainer.resume=false",
            "--run-dir",
            str(_checkpoint_run(t, lambda d: None)),
        ],
        r"holds checkpoints of an earlier run \(newest step_1\) and trainer\.resume=false",
    ),
    # -- corrupt checkpoints with nothing older to fall back to
    (
        "ckpt-zero-byte-state",
        lambda t: [
            *BASE,
            "--run-dir",
            str(_checkpoint_run(t, lambda d: (d / "trainer_state.pt").write_bytes(b""))),
        ],
        r"no usable checkpoint.*trainer_state\.pt has 0 bytes",
    ),
    (
        "ckpt-missing-state",
        lambda t: [
            *BASE,
            "--run-dir",
            str(_checkpoint_run(t, lambda d: (d / "trainer_state.pt").unlink())),
        ],
        r"no usable checkpoint.*trainer_state\.pt is missing",
    ),
    (
        "ckpt-truncated-engine",
        lambda t: [
            *BASE,
            "--run-dir",
            str(_checkpoint_run(t, lambda d: (d / "actor" / "actor_engine.pt").write_bytes(b"x"))),
        ],
        r"no usable checkpoint.*actor_engine\.pt has 1 bytes",
    ),
    (
        "ckpt-corrupt-marker",
        lambda t: [
            *BASE,
            "--run-dir",
            str(_checkpoint_run(t, lambda d: (d / "COMPLETE").write_text("{garbage"))),
        ],
        r"no usable checkpoint.*COMPLETE is corrupt",
    ),
    (
        "ckpt-garbage-state-same-size",
        lambda t: [
            *BASE,
            "--run-dir",
            str(_checkpoint_run(t, _scramble_state)),
        ],
        r"no usable checkpoint.*trainer_state\.pt does not match its xxh3_128 checksum",
    ),
    (
        "ckpt-engine-one-byte-flipped",
        lambda t: [
            *BASE,
            "--run-dir",
            str(_checkpoint_run(t, _flip_a_byte)),
        ],
        r"no usable checkpoint.*actor_engine\.pt does not match its xxh3_128 checksum",
    ),
]


def _flip_a_byte(directory: Path) -> None:
    path = directory / "actor" / "actor_engine.pt"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def _scramble_state(directory: Path) -> None:
    path = directory / "trainer_state.pt"
    path.write_bytes(b"\0" * path.stat().st_size)


@pytest.fixture
def no_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail any case that would start or join Ray (a bare error, so it surfaces as internal)."""
    import ray

    from hfsdk.core.workers.ray_runtime import shutdown

    shutdown()  # a Ray left running by an earlier test would hide a case that reaches it

    def refuse(*_a: object, **_k: object) -> None:
        raise SystemError("ray.init was called: this bad input was not caught before Ray")

    monkeypatch.setattr(ray, "init", refuse)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.delenv("HFSDK_FAULT_INJECT", raising=False)


def _snapshot(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")}


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_gives_one_line(
    case: Case,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    no_ray: None,
) -> None:
    name, build, pattern = case
    for key, value in ENV.get(name, {}).items():
        monkeypatch.setenv(key, value)
    if name in ENV and "HFSDK_DISABLE_PLUGINS" in ENV[name]:
        from hfsdk.core.plugin_manager import reset_plugin_manager

        reset_plugin_manager()
    monkeypatch.chdir(tmp_path)  # a default runs/<algo>-<ts> would land here
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    args = build(inputs)
    before = _snapshot(tmp_path)
    try:
        with pytest.raises(SystemExit) as info:
            main(["run", *args])
    finally:
        while _HELD:
            _HELD.pop().release()
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert info.value.code not in (0, None), err
    assert len(lines) == 1, err
    assert "Traceback" not in err + out
    assert lines[0].startswith("Error: ") and "internal error" not in lines[0], lines[0]
    import re

    assert re.search(pattern, lines[0]), lines[0]
    after = _snapshot(tmp_path)
    added = {p for p in after - before if not p.endswith(".lock") and "__pycache__" not in p}
    assert not added, f"left behind: {sorted(added)}"


def test_the_matrix_is_large_enough() -> None:
    assert len(CASES) >= 40
