"""``hfsdk data inspect``: rows, prompt key, rendered prompt, reward columns, drops; no Ray."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from hfsdk.core.cli.main import main

VERL_SCORE = """
def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    return float(solution_str.strip() == ground_truth)


def brevity(prompts, responses, ground_truth):
    return [0.0 for _ in responses]
"""


def _hfsdk(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(list(args))
    out, err = capsys.readouterr()
    return int(info.value.code or 0), out, err


def _write(tmp_path: Path, rows: list[dict]) -> Path:
    import datasets

    path = tmp_path / "train.parquet"
    datasets.Dataset.from_list(rows).to_parquet(str(path))
    return path


def _verl_row(prompt: str, truth: str | None) -> dict:
    return {
        "data_source": "toy",
        "prompt": [{"role": "user", "content": prompt}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": truth},
        "extra_info": {"index": 0},
    }


def test_inspect_reports_a_verl_parquet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # any use of Ray would fail the command
    rows = [_verl_row("2 + 3 =", "5"), _verl_row("1 + 1 = 1 + 1 = 1 + 1 =", "2")]
    rows.append(_verl_row("4 + 4 =", None))
    path = _write(tmp_path, rows)
    (tmp_path / "rewards.py").write_text(VERL_SCORE)
    config = {
        "data": {"max_prompt_length": 8},
        "reward": {
            "functions": [
                {"name": str(tmp_path / "rewards.py") + ":compute_score"},
                {"name": str(tmp_path / "rewards.py") + ":brevity"},
            ]
        },
    }
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(config))
    code, out, err = _hfsdk(
        capsys, "data", "inspect", str(path), "--config", str(tmp_path / "run.yaml")
    )
    assert code == 0, err
    assert "rows:             3" in out
    assert "prompt key:       prompt (chat messages)" in out
    assert "rendering:        plain" in out
    # '<s> 2 + 3 =': the default tokenizer's BOS plus four words.
    assert "first prompt:     '2 + 3 =' (5 tokens)" in out
    assert (
        "reward columns:   ability, data_source, extra_info, ground_truth, prompt, "
        "reward_model, uid" in out
    )
    assert "dropped (length): 1 of 3 rows longer than data.max_prompt_length=8 tokens" in out
    assert (
        "compute_score (style verl) reads data_source, ground_truth, extra_info; MISSING: ground_truth in 1 of 2 rows"
        in out
    )
    assert "brevity (style hfsdk) reads ground_truth" in out


def test_inspect_bad_shapes_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = _write(tmp_path, [{"prompt": [{"role": "user", "text": "2 + 3 ="}]}])
    code, _out, err = _hfsdk(capsys, "data", "inspect", str(bad))
    assert code == 2
    last = err.strip().splitlines()[-1]
    assert last.startswith("Error: ") and "row 0 of column 'prompt'" in last
    assert "message 0 (user) has no text 'content'" in last
    code, _, err = _hfsdk(capsys, "data", "inspect")
    assert code == 2 and "no dataset files given" in err
    code, _, err = _hfsdk(capsys, "data", "inspect", str(bad), "--set", "data.prompt_key=question")
    assert code == 2 and "has no column 'question'" in err
    # Before: "check data.train_files", a key the user never set (the file came as an argument).
    missing = str(tmp_path / "nope.parquet")
    for args in ((missing,), ("--algo", "grpo", missing)):
        code, _, err = _hfsdk(capsys, "data", "inspect", *args)
        assert code == 2 and err.strip().endswith("does not exist; check the FILE arguments")


def test_the_missing_chat_template_is_said_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, [_verl_row("2 + 3 =", "5"), _verl_row("4 + 4 =", "8")])
    code, out, err = _hfsdk(capsys, "data", "inspect", str(path))
    assert code == 0, err
    assert (out + err).count("no chat template") == 1, out + err


def test_inspect_reports_the_share_of_unknown_tokens(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [{"prompt": f"Tom has {i} cards and gets 6 more", "answer": "six"} for i in range(4)]
    path = _write(tmp_path, rows)
    code, out, err = _hfsdk(capsys, "data", "inspect", str(path))
    assert code == 0, err
    # The default task's word-level vocabulary holds digits, '+', '=' and few words:
    # of '<s> Tom has 0 cards and gets 6 more' only BOS and the digits are known.
    line = next(line for line in out.splitlines() if line.startswith("unknown tokens:"))
    prompt_share = float(line.split("prompt ")[1].split("%")[0])
    assert prompt_share > 50.0
    assert "answer 100.0%" in line
    assert "a run stops" in out
    good = _write(tmp_path, [{"prompt": "2 + 3 =", "answer": "5"}])
    code, out, _ = _hfsdk(capsys, "data", "inspect", str(good))
    assert "unknown tokens:   prompt 0.0%, answer 0.0%" in out and "a run stops" not in out


def _question_solution(tmp_path: Path) -> Path:
    import json

    path = tmp_path / "qs.jsonl"
    rows = [{"question": "2 + 3 =", "solution": "5"}, {"question": "1 + 1 =", "solution": "2"}]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_a_bare_override_is_taken_as_in_hfsdk_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Review: `hfsdk data inspect qs.jsonl data.prompt_key=question` said "dataset file
    # 'data.prompt_key=question' does not exist"; `hfsdk run` takes bare key=value overrides.
    monkeypatch.chdir(tmp_path)
    path = _question_solution(tmp_path)
    code, out, err = _hfsdk(capsys, "data", "inspect", path.name, "data.prompt_key=question")
    assert code == 0, err
    assert "files:            qs.jsonl\n" in out
    assert "prompt key:       question (plain text)" in out
    # ... also where the run's own resolution applies (--algo)
    code, out, err = _hfsdk(
        capsys, "data", "inspect", "--algo", "grpo", path.name, "data.prompt_key=question"
    )
    assert code == 0, err
    assert "prompt key:       question (plain text)" in out
    # an existing file whose name holds '=' stays a file
    (tmp_path / "a=b.jsonl").write_text(path.read_text())
    code, out, err = _hfsdk(capsys, "data", "inspect", "a=b.jsonl", "data.prompt_key=question")
    assert code == 0, err
    assert "files:            a=b.jsonl\n" in out
    # a missing path whose '=' follows no config key stays a file, with a file's error
    code, _, err = _hfsdk(capsys, "data", "inspect", "runs/lr=1e-6/qs.jsonl")
    assert code == 2 and "dataset file 'runs/lr=1e-6/qs.jsonl' does not exist" in err


def test_inspect_finds_the_missing_answer_column_the_run_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # issue 34: `exact_match … reads question, solution, uid` with no warning; the run
    # failed at step 1. Now both say it, with the run's own line, before anything starts.
    path = _question_solution(tmp_path)
    config = {
        "data": {"prompt_key": "question", "train_files": [str(path)]},
        "reward": {"functions": [{"name": "exact_match"}]},
    }
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(config))
    expected = (
        "reward function 'exact_match' reads the dataset column 'answer', which the dataset "
        "lacks (columns: question, solution, uid)"
    )
    code, out, err = _hfsdk(capsys, "data", "inspect", "--config", str(tmp_path / "run.yaml"))
    assert code == 0, err
    line = next(line for line in out.splitlines() if line.startswith("reward function:"))
    assert line.startswith(
        "reward function:  exact_match (style hfsdk) reads answer; MISSING: A RUN STOPS BEFORE "
        "IT STARTS: " + expected
    ), line

    import ray

    def refuse(*_a: object, **_k: object) -> None:
        raise SystemError("ray.init was called: the run was not refused before Ray")

    monkeypatch.setattr(ray, "init", refuse)
    monkeypatch.chdir(tmp_path)
    code, out, err = _hfsdk(
        capsys, "run", "--algo", "grpo", "--quiet", "--config", str(tmp_path / "run.yaml"),
        "trainer.total_steps=1",
    )  # fmt: skip
    assert code == 2, err
    assert err.strip().splitlines()[-1].startswith("Error: " + expected)
    assert not (tmp_path / "runs").exists()  # refused before a run directory was made

    # ... and a config that names the column passes both
    config["reward"] = {
        "functions": [{"name": "exact_match", "kwargs": {"answer_column": "solution"}}]
    }
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(config))
    code, out, err = _hfsdk(capsys, "data", "inspect", "--config", str(tmp_path / "run.yaml"))
    assert code == 0, err
    assert "reward function:  exact_match (style hfsdk) reads solution\n" in out + "\n"


def test_inspect_accepts_a_default_task_run_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # issue 34: a default-task run's config was refused ("no dataset files given").
    monkeypatch.setitem(sys.modules, "ray", None)  # any use of Ray would fail the command
    (tmp_path / "run.yaml").write_text(
        yaml.safe_dump({"algo": "grpo", "trainer": {"total_steps": 2}})
    )
    code, out, err = _hfsdk(capsys, "data", "inspect", "--config", str(tmp_path / "run.yaml"))
    assert code == 0, err
    files = next(line for line in out.splitlines() if line.startswith("files:"))
    assert files.endswith("train.jsonl") and "default_task" in files  # the run's own data
    assert "prompt key:       prompt (plain text)" in out
    assert "reward columns:   answer, prompt, uid" in out
    # the run's reward when the config names none: the default task's
    assert "reward function:  default_task (style hfsdk) reads" in out
    assert "MISSING" not in out and "a run stops" not in out
    # --algo alone does the same
    code, out2, err = _hfsdk(capsys, "data", "inspect", "--algo", "grpo")
    assert code == 0 and out2 == out, err
    # an override applies as in a run, and what the run refuses is refused the same way
    code, _, err = _hfsdk(
        capsys, "data", "inspect", "--algo", "grpo", "--set", "data.max_prompt_length=4"
    )
    assert code == 2
    assert (
        err.strip()
        == "Error: every prompt is longer than data.max_prompt_length=4 tokens; raise the limit"
    )


def test_inspect_names_why_prompts_get_the_plain_rendering(tmp_path: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from hfsdk_migration.inspection import inspect_dataset

    words = ["<pad>", "<unk>", "2", "+", "3", "="]
    raw = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=raw, pad_token="<pad>", unk_token="<unk>", name_or_path="templated"
    )
    tokenizer.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
    path = _write(tmp_path, [_verl_row("2 + 3 =", "5")])
    off = inspect_dataset([str(path)], tokenizer, {"apply_chat_template": False})
    assert off.template == "plain (data.apply_chat_template=false; see docs/migrating.md)"
    tokenizer.chat_template = None
    none = inspect_dataset([str(path)], tokenizer, {})
    assert none.template == "plain (the tokenizer has no chat template; see docs/migrating.md)"


# A chat template that renders the tools it is given before the messages (the task model's
# own template ignores them).
TOOLS_TEMPLATE = (
    "{% if tools %}{% for t in tools %}{{ t['function']['name'] }} "
    "{{ t['function']['description'] }} {% endfor %}{% endif %}"
    "{% for m in messages %}{{ m['content'] }}{% endfor %}"
)


def test_inspect_renders_the_tools_the_run_puts_in_the_prompt(tmp_path: Path) -> None:
    # review F1: inspect left out the tool schemas the run's chat template renders, so its
    # first prompt, token counts and dropped rows were not the ones the run trains on.
    pytest.importorskip("hfsdk_agents")  # the tool_use task and its `add` tool
    import json
    import shutil

    from hfsdk import HfsdkError, load_run_config, prepare_run, run_spec
    from hfsdk.core.cli.options import task_base
    from hfsdk_migration.inspection import inspect_run

    base = task_base("tool_use", "grpo")
    assert base is not None
    model = tmp_path / "model"
    shutil.copytree(base["actor"]["model_path"], model)
    tokenizer_file = model / "tokenizer_config.json"
    tokenizer_config = json.loads(tokenizer_file.read_text())
    tokenizer_config["chat_template"] = TOOLS_TEMPLATE
    tokenizer_file.write_text(json.dumps(tokenizer_config))
    base["actor"]["model_path"] = str(model)
    base["data"]["max_unknown_token_share"] = 1.0  # the tool's words are new to the model
    config_file = tmp_path / "tool.yaml"
    config_file.write_text(yaml.safe_dump({"algo": "grpo", **base}))

    report = inspect_run(None, str(config_file), [])
    config = load_run_config(None, str(config_file), [])
    loader = prepare_run(config, run_spec(config)).loader
    assert report.first_prompt == loader.rows[0]["rendered_prompt"]
    assert report.first_prompt.startswith("add Add two integers. ")
    assert report.first_prompt_tokens == len(loader.token_ids[0])
    assert (report.kept, report.dropped) == (len(loader), loader.dropped)
    # a limit only the tools' words exceed: the run refuses every prompt, and so does inspect
    limit = ["data.max_prompt_length=6"]
    with pytest.raises(HfsdkError, match=r"longer than data\.max_prompt_length=6 tokens"):
        inspect_run(None, str(config_file), limit)
    limited = load_run_config(None, str(config_file), limit)
    with pytest.raises(HfsdkError, match=r"longer than data\.max_prompt_length=6 tokens"):
        prepare_run(limited, run_spec(limited))
