"""``hfsdk config import`` on what is not a config (issue 35): one line, exit 2, fast, and
nothing written (an ``--out`` stays as it was)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from hfsdk_testing import alias_bomb, assert_refused_in_one_line

IMPORT = ("config", "import", "--from", "verl")
TRL = ("config", "import", "--from", "trl")
UNCLOSED = (
    "set -x\n"
    "python3 -m verl.trainer.main_ppo \\\n"
    "    data.train_batch_size=32 \\\n"
    '    actor_rollout_ref.model.path="Qwen/Qwen2.5-0.5B \\\n'
    "    trainer.total_epochs=2\n"
)


def _file(tmp: Path, name: str, content: str | bytes) -> str:
    path = tmp / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return str(path)


def _bomb_dir(tmp: Path) -> str:
    """A verl config directory whose ppo_trainer.yaml is an alias bomb (Hydra reads it)."""
    (tmp / "verl_config").mkdir()
    (tmp / "verl_config" / "ppo_trainer.yaml").write_text(alias_bomb())
    return str(tmp / "verl_config")


def _dir(tmp: Path) -> str:
    (tmp / "configs").mkdir()
    (tmp / "configs" / "ppo.yaml").write_text("data: {}\n")
    return str(tmp / "configs")


Case = tuple[str, Callable[[Path], list[str]], str]
CASES: list[Case] = [
    (
        "alias-bomb",
        lambda t: [*IMPORT, _file(t, "bomb.yaml", alias_bomb())],
        r"aliases expand to more than 1,000,000 nodes",
    ),
    (
        "config-dir-alias-bomb",
        lambda t: [
            *IMPORT,
            "--verl-config-dir",
            _bomb_dir(t),
            _file(t, "run.sh", "python3 -m verl.trainer.main_ppo data.train_batch_size=32\n"),
        ],
        r"ppo_trainer\.yaml': YAML aliases expand to more than 1,000,000 nodes",
    ),
    (
        "binary-file",
        lambda t: [*IMPORT, _file(t, "model.bin", bytes(range(256)) * 8)],
        r"'.*model\.bin' is not a text file",
    ),
    (
        "directory",
        lambda t: [*IMPORT, _dir(t)],
        r"'.*configs' is a directory; pass a file in it.*--verl-config-dir",
    ),
    (
        "unclosed-quote",
        lambda t: [
            *IMPORT,
            _file(t, "run.sh", UNCLOSED),
            "--out",
            _file(t, "out.yaml", "kept: as it was\n"),
        ],
        r"the \" quote opened on line 4 .* is never closed.*nothing was written",
    ),
]


# Malformed values in the source's own syntax: one line naming the key, not an internal error.
CASES += [
    (
        "trl-bare-report-to",
        lambda t: [*TRL, "--report_to"],
        r"report_to=True is not a logger name or a list of them; give names such as",
    ),
    (
        "openrlhf-one-beta",
        lambda t: ["config", "import", "--from", "openrlhf", "--adam_betas", "0.9"],
        r"adam_betas=0\.9 is not a list of 2 numbers",
    ),
    (
        "openrlhf-word-beta",
        lambda t: ["config", "import", "--from", "openrlhf", "--adam_betas", "0.9", "x"],
        r"adam_betas='x' is not a number",
    ),
    (
        "verl-one-beta",
        lambda t: [*IMPORT, "actor_rollout_ref.actor.optim.betas=0.9"],
        r"actor_rollout_ref\.actor\.optim\.betas=0\.9 is not a list of 2 numbers",
    ),
    (
        "openrlhf-gpus-word",
        lambda t: ["config", "import", "--from", "openrlhf", "--actor_num_gpus_per_node", "x"],
        r"actor_num_gpus_per_node='x' is not a number",
    ),
    (
        "openrlhf-clip-words",
        lambda t: ["config", "import", "--from", "openrlhf", "--eps_clip_low_high", "a", "b"],
        r"eps_clip_low_high='a' is not a number",
    ),
    # A value-taking flag given bare reads as True, and float(True) is 1.0: refused, not lr 1.0.
    (
        "trl-bare-lr-before-a-flag",
        lambda t: [*TRL, "--learning_rate", "--num_generations", "8"],
        r"Error: --learning_rate needs a value \(got a bare flag",
    ),
    (
        "trl-trailing-bare-lr",
        lambda t: [*TRL, "--num_generations", "8", "--learning_rate"],
        r"Error: --learning_rate needs a value \(got a bare flag",
    ),
    (
        "trl-bare-int",
        lambda t: [*TRL, "--num_generations"],
        r"Error: --num_generations needs a value \(got a bare flag.*give it an integer",
    ),
    (
        "trl-empty-lr",
        lambda t: [*TRL, "--learning_rate="],
        r"Error: --learning_rate needs a value \(got an empty one\)",
    ),
    (
        "trl-yaml-true-lr",
        lambda t: [*TRL, _file(t, "t.yaml", "learning_rate: true\n")],
        r"Error: --learning_rate needs a value \(got a bare flag, or true in the config file\)",
    ),
    (
        "openrlhf-bare-lr",
        lambda t: ["config", "import", "--from", "openrlhf", "--actor_learning_rate"],
        r"Error: --actor_learning_rate needs a value \(got a bare flag",
    ),
    (
        "verl-true-lr",
        lambda t: [*IMPORT, "actor_rollout_ref.actor.optim.lr=true"],
        r"Error: actor_rollout_ref\.actor\.optim\.lr=True is not a number",
    ),
    # A file without a defaults list is the whole config (as Hydra composes it for verl).
    (
        "verl-whole-file-override",
        lambda t: [
            *IMPORT,
            _file(t, "v.yaml", "data: {train_batch_size: 32}\n"),
            "actor_rollout_ref.actor.optim.lr=1e-5",
        ],
        r"v\.yaml' has no defaults list, so it is the whole config and lacks "
        r"'actor_rollout_ref\.actor\.optim\.lr'; add `defaults: \[ppo_trainer, _self_\]`",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2(
    case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _name, build, pattern = case
    monkeypatch.chdir(tmp_path)
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    assert_refused_in_one_line(build(inputs), pattern, capsys, root=tmp_path)
