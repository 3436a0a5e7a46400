"""``hfsdk reward score`` with ``code_tests``: rows scored in the sandbox, with their reasons."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hfsdk.core.cli.main import main


def _score(capsys: pytest.CaptureFixture[str], rows: Path, *settings: str) -> tuple[int, str, str]:
    """``hfsdk reward score code_tests --data ROWS SETTINGS...``: (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as info:
        main(["reward", "score", "code_tests", "--data", str(rows), *settings])
    out, err = capsys.readouterr()
    return int(info.value.code or 0), out, err


@pytest.mark.usefixtures("sandbox_any_isolation")
def test_code_tests_rows_are_scored_with_their_reasons(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    truth = json.dumps({"asserts": ["assert add(1, 2) == 3", "assert add(5, 5) == 10"]})
    rows = [
        {"prompt": "add", "response": "```python\ndef add(a, b):\n    return a + b\n```"},
        {"prompt": "add", "response": "```python\nimport os\ndef add(a, b):\n    os._exit(0)\n```"},
        {"prompt": "add", "response": "```python\ndef add(a, b):\n    return 3\n```"},
    ]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps({**r, "ground_truth": truth}) + "\n" for r in rows))
    code, out, err = _score(capsys, path, "limits.wall_s=4", "max_cases=8")
    assert code == 0, err
    scored = [json.loads(line) for line in out.splitlines()]
    assert [r["score"] for r in scored] == [1.0, 0.0, 0.0]
    assert scored[1]["early_exit"] == 1.0 and scored[2]["cases_passed"] == 0.5


def test_code_tests_says_once_why_it_scores_zero_when_bubblewrap_cannot_start(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hfsdk_sandbox.bwrap import unavailable_reason
    from hfsdk_sandbox.runner import ISOLATION_ENV

    monkeypatch.setenv("HFSDK_SANDBOX_BWRAP", "")
    monkeypatch.setenv(ISOLATION_ENV, "os")
    unavailable_reason.cache_clear()
    try:
        truth = json.dumps({"inputs": ["1 2\n"], "outputs": ["3\n"]})
        row = {"prompt": "add", "response": "```python\nprint(sum(map(int, input().split())))\n```"}
        path = tmp_path / "rows.jsonl"
        path.write_text(json.dumps({**row, "ground_truth": truth}) + "\n")
        code, out, err = _score(capsys, path)
    finally:
        unavailable_reason.cache_clear()  # the next caller probes the real machine again
    assert code == 0, err
    assert json.loads(out)["refused"] == 1.0
    assert err.count("bubblewrap cannot start") == 1, err


def test_an_unknown_setting_names_the_allowed_keys(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({"prompt": "p", "response": "r", "ground_truth": "{}"}) + "\n")
    code, _, err = _score(capsys, path, "wall=3")
    assert code == 2 and err.count("\n") == 1 and "allowed keys" in err


def test_rows_are_split_at_newlines_only_and_a_bom_is_read(tmp_path: Path) -> None:
    from hfsdk_rewards.command import read_rows

    rows = [{"response": "a\u2028b\x85c", "answer": "x"}, {"response": "d", "answer": "y"}]
    text = "".join(json.dumps(r, ensure_ascii=False) + "\r\n" for r in rows)
    (tmp_path / "rows.jsonl").write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    assert read_rows(str(tmp_path / "rows.jsonl")) == rows


def test_chat_prompts_reach_the_function_as_a_run_gives_them(tmp_path: Path) -> None:
    from hfsdk import HfsdkError
    from hfsdk_rewards.command import score_rows

    (tmp_path / "rw.py").write_text(
        "def echo(prompts, responses, prompt_messages=None, **kw):\n"
        "    return [{'score': len(m or []), 'prompt': p}"
        " for p, m in zip(prompts, prompt_messages)]\n"
    )
    chat = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "2 + 2 ="}]
    rows = [
        {"prompt": chat, "response": "4"},
        {"prompt": [{"role": "user", "content": "3 + 3 ="}], "response": "6"},
        {"prompt": "plain", "response": "x"},
    ]
    scored = score_rows(f"{tmp_path / 'rw.py'}:echo", rows, ())
    # The plain rendering a run's reward functions get, not the list's Python repr.
    assert [r["prompt"] for r in scored] == [
        "system: be brief\nuser: 2 + 2 =\nassistant:",
        "3 + 3 =",
        "plain",
    ]
    assert [r["score"] for r in scored] == [2.0, 1.0, 0.0]
    with pytest.raises(HfsdkError, match=r"^--data row 1: 'prompt' is \[1, 2\]; expected a str"):
        score_rows(f"{tmp_path / 'rw.py'}:echo", [{"prompt": [1, 2], "response": "r"}], ())


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("    sys.exit(0)\n", "called sys.exit(0); return a score per sample instead"),
        ("    raise HfsdkError('no answer here')\n", "no answer here"),
    ],
)
def test_an_error_the_function_raises_names_the_function(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, body: str, message: str
) -> None:
    (tmp_path / "ex.py").write_text(
        "import sys\nfrom hfsdk import HfsdkError\ndef ex(prompts, responses, **c):\n" + body
    )
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"prompt": "a", "response": "x"}) + "\n")
    name = f"{tmp_path / 'ex.py'}:ex"
    with pytest.raises(SystemExit) as info:
        main(["reward", "score", name, "--data", str(rows)])
    _, err = capsys.readouterr()
    assert info.value.code != 0
    # As `hfsdk run` words it (docs/rewards.md), the prefix once.
    assert err.strip() == f"Error: reward function {name!r}: {message}"


def test_a_missing_column_names_the_builtin_once(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"prompt": "a", "response": "x"}) + "\n")
    with pytest.raises(SystemExit):
        main(["reward", "score", "exact_match", "--data", str(rows)])
    _, err = capsys.readouterr()
    # The run's preflight line (hfsdk run and data inspect give the same).
    assert err.startswith(
        "Error: reward function 'exact_match' reads the dataset column 'answer', which the "
        "dataset lacks (columns: none); set kwargs: {answer_column: COLUMN}"
    )
    assert err.count("reward function 'exact_match'") == 1


def test_an_error_that_already_names_the_function_is_not_prefixed_again(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "ex.py").write_text("def ex(prompts, responses, **c):\n    return [1.0]\n")
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"prompt": "a", "response": "x", "answer": "1"}) + "\n")
    name = f"{tmp_path / 'ex.py'}:ex"
    with pytest.raises(SystemExit):
        main(["reward", "score", name, "--data", str(rows), "answer=2"])
    _, err = capsys.readouterr()
    assert err.startswith(f"Error: reward function {name!r}: setting(s) ['answer']")
    assert err.count(f"reward function {name!r}") == 1


def test_a_setting_the_function_does_not_take_is_refused_before_it_is_called(
    tmp_path: Path,
) -> None:
    # A misspelt setting was a raw TypeError blamed on row 0's data ("fix the function or ...").
    from hfsdk import HfsdkError
    from hfsdk_rewards.command import score_rows

    (tmp_path / "lim.py").write_text(
        "def brevity(prompts, responses, limit=200):\n"
        "    return [float(len(r) <= limit) for r in responses]\n"
    )
    rows = [{"prompt": "p", "response": "r"}]
    with pytest.raises(HfsdkError, match=r"setting 'limt' .* did you mean 'limit'\?"):
        score_rows(f"{tmp_path / 'lim.py'}:brevity", rows, ("limt=3",))
    assert score_rows(f"{tmp_path / 'lim.py'}:brevity", rows, ("limit=3",))[0]["score"] == 1.0


def test_a_column_the_rows_lack_is_refused_before_the_function_is_called(tmp_path: Path) -> None:
    # It was a raw "TypeError: keyword_bonus() missing 1 required positional argument".
    from hfsdk import HfsdkError
    from hfsdk_rewards.command import score_rows

    (tmp_path / "kw.py").write_text(
        "def keyword_bonus(prompts, responses, keyword):\n"
        "    return [float(k in r) for k, r in zip(keyword, responses)]\n"
    )
    name = f"{tmp_path / 'kw.py'}:keyword_bonus"
    rows = [{"prompt": "p", "response": "r", "answer": "1"}]
    with pytest.raises(HfsdkError) as info:
        score_rows(name, rows, ())
    assert str(info.value).startswith(
        f"reward function {name!r} needs 'keyword', which is neither a dataset column "
        "(answer) nor a setting in its kwargs"
    )
    assert score_rows(name, [{**rows[0], "keyword": "r"}], ())[0]["score"] == 1.0
