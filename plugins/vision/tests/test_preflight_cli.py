"""Image runs the trainer cannot carry stop at ``hfsdk run`` in one line, before any worker:
a text rollout (``hf``, ``vllm``) and a training backend without a vision path (``megatron``)."""

from __future__ import annotations

import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hfsdk import HfsdkError, get_registry
from hfsdk.core.cli.main import main
from hfsdk_vision.preflight import backend_check
from hfsdk_vision.shapes import shapes_rows, write_parquet

REWARD = "reward.functions=[{name: shapes}]"
CHAT_NOTE = (
    "the tokenizer has no chat template: chat prompts use the plain rendering (a lone user "
    "message is its content; otherwise 'role: content' lines and 'assistant:'), see "
    "docs/migrating.md"
)


@pytest.fixture
def no_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Starting workers (Ray or in-process) fails the test: the refusal must come first."""
    import hfsdk.core.workers as workers

    def refuse(*_a: Any, **_k: Any) -> Callable[..., Any]:
        raise AssertionError("workers were started for a run that must be refused")

    monkeypatch.setattr(workers, "connect", refuse)


def _refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """Run ``hfsdk run`` and return its one error line; no run directory may be left.

    The shapes rows are chat messages, so the loader's one-line note that the tiny tokenizer
    has no chat template may come before the error; the error is the last line and the only one.
    """
    run_dir = tmp_path / "run"
    with pytest.raises(SystemExit) as info:
        main(["run", "--algo", "grpo", "--quiet", "--run-dir", str(run_dir), *args])
    lines = capsys.readouterr().err.strip().splitlines()
    assert int(info.value.code or 0) != 0
    errors = [line for line in lines if line.startswith("Error:")]
    assert len(errors) == 1 and lines[-1] == errors[0], lines
    assert not any("Traceback" in line for line in lines)
    assert set(lines[:-1]) <= {CHAT_NOTE}, lines
    assert not run_dir.exists()
    return errors[0]


def _need(registry: str, name: str) -> None:
    if name not in get_registry(registry):
        pytest.skip(f"{name!r} ({registry}) is not installed")


@pytest.mark.parametrize("backend", ["hf", "vllm"])
def test_a_text_rollout_of_image_prompts_is_one_line(
    tmp_path: Path,
    vlm_dir: Path,
    capsys: pytest.CaptureFixture[str],
    no_workers: None,
    backend: str,
) -> None:
    _need("rollout_backends", backend)
    train = write_parquet(shapes_rows(4, seed=0), tmp_path / "train.parquet")
    err = _refused(
        tmp_path,
        capsys,
        f"actor.model_path={vlm_dir}",
        f"data.train_files=[{train}]",
        f"rollout.backend={backend}",
        REWARD,
    )
    assert f"rollout.backend={backend} generates from text only" in err
    assert err.endswith("set rollout.backend=hf_vision")
    # vLLM's reason is the checked fact (docs/multimodal.md, "vLLM"), not a missing feature.
    assert ("cannot load Qwen2-VL on CPU" in err) == (backend == "vllm")


def test_megatron_with_image_prompts_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_workers: None
) -> None:
    # A text model megatron converts (the default task's Llama) passes config validation;
    # without this check the run failed in the actor's __init__, after the workers started.
    _need("training_backends", "megatron")
    train = write_parquet(shapes_rows(4, seed=0), tmp_path / "train.parquet")
    err = _refused(
        tmp_path,
        capsys,
        "actor.backend=megatron",
        "rollout.backend=hf_vision",
        f"data.train_files=[{train}]",
        "data.max_unknown_token_share=1.0",  # the Llama's word-level tokenizer
        REWARD,
    )
    assert err == (
        "Error: actor.backend=megatron has no vision path (the prompts carry images (column "
        "'images'), and only the fsdp backend's forward takes them); use actor.backend=fsdp"
    )


def test_megatron_on_the_vision_model_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_workers: None
) -> None:
    # The megatron converter knows no Qwen2-VL: refused when the config loads.
    _need("training_backends", "megatron")
    err = _refused(tmp_path, capsys, "--task", "shapes", "actor.backend=megatron")
    assert "['Qwen2VLForConditionalGeneration']" in err and "use backend: fsdp" in err


def _config(rollout: str, **backends: str) -> Any:
    sections = {role: types.SimpleNamespace(backend=b) for role, b in backends.items()}
    return types.SimpleNamespace(rollout=types.SimpleNamespace(backend=rollout), **sections)


SPEC = types.SimpleNamespace(
    role_names=("actor", "critic", "reference"),
    kind_of={"actor": "policy", "critic": "value", "reference": "frozen_policy"}.__getitem__,
)


def _prepared(images: bool) -> Any:
    rows = [{"uid": "0", "images": [b"png"] if images else []}]
    loader = types.SimpleNamespace(rows=rows)
    return types.SimpleNamespace(loader=loader, val_loader=None, row_columns=("images",))


def test_the_backend_check_names_the_role_and_passes_text_runs() -> None:
    fsdp = {"actor": "fsdp", "critic": "megatron", "reference": "fsdp"}
    assert backend_check(_config("hf_vision", **fsdp), SPEC, _prepared(True)) is None
    on_megatron = {**fsdp, "reference": "megatron"}
    with pytest.raises(HfsdkError, match=r"^reference\.backend=megatron has no vision path"):
        backend_check(_config("hf_vision", **on_megatron), SPEC, _prepared(True))
    # hf_vision with no image in the rows is still refused: it needs a Qwen2-VL-family actor.
    with pytest.raises(HfsdkError, match=r"rollout\.backend=hf_vision generates from images"):
        backend_check(_config("hf_vision", **on_megatron), SPEC, _prepared(False))
    # A text run (text rollout, no images) on megatron is none of this check's business.
    assert backend_check(_config("hf", **on_megatron), SPEC, _prepared(False)) is None


def test_vllm_still_cannot_load_qwen2_vl_here() -> None:
    """The fact the ``vllm`` refusal states (docs/multimodal.md, "vLLM"): vLLM's Qwen2-VL module
    needs torchvision, which this CPU torch cannot import. When this fails, vLLM may load the
    model: check generation from an image and revisit the refusal."""
    pytest.importorskip("vllm")
    with pytest.raises(ModuleNotFoundError) as info:
        import vllm.model_executor.models.qwen2_vl  # noqa: F401
    assert info.value.name == "torchvision"
