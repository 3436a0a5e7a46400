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
from hfsdk_vision.preflight import backend_check, images_check
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


def _refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str, algo: str = "grpo"
) -> str:
    """Run ``hfsdk run`` and return its one error line; no run directory may be left.

    The shapes rows are chat messages, so the loader's one-line note that the tiny tokenizer
    has no chat template may come before the error; the error is the last line and the only one.
    """
    run_dir = tmp_path / "run"
    with pytest.raises(SystemExit) as info:
        main(["run", "--algo", algo, "--quiet", "--run-dir", str(run_dir), *args])
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


POOL_REFUSAL = (
    "placement.pools.rollout has no vision path ({why}, but the rollout replicas load the "
    "model as a text causal LM and partial rollouts keep the token ids alone); remove "
    "placement.pools.rollout (rollout.backend=hf_vision generates on the actor's weights)"
)


def test_an_image_run_on_a_rollout_pool_is_one_line_before_any_worker(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_workers: None
) -> None:
    # The replica loaded AutoModelForCausalLM from the Qwen2-VL directory and the run failed
    # a minute in, at the rollout worker's start, with transformers' error.
    run_dir = tmp_path / "run"
    with pytest.raises(SystemExit) as info:
        main(
            ["run", "--algo", "grpo", "--quiet", "--run-dir", str(run_dir), "--task", "shapes",
             "placement.pools.rollout.devices=1", "trainer.executor=ray"]
        )  # fmt: skip
    assert info.value.code == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("Error:")]
    why = "the prompts carry images (column 'images')"
    assert errors == ["Error: " + POOL_REFUSAL.format(why=why)]
    assert not run_dir.exists()


def test_the_preflight_checks_refuse_a_rollout_pool_for_the_shapes_task() -> None:
    from hfsdk import load_run_config, run_spec
    from hfsdk.core.trainer.preflight import prepare_run
    from hfsdk_vision.shapes_task import ensure_shapes_assets, shapes_settings

    base = shapes_settings(ensure_shapes_assets())
    pools = ["placement.pools.global.devices=1", "placement.pools.rollout.devices=1"]
    for extra in ([], ["trainer.pipeline=async", "trainer.partial_rollout_tokens=1"]):
        config = load_run_config("grpo", None, [*pools, *extra], base=base)
        with pytest.raises(HfsdkError, match=r"^placement\.pools\.rollout has no vision path"):
            prepare_run(config, run_spec(config))
    prepare_run(load_run_config("grpo", None, [], base=base), run_spec(config))  # no pool: runs


def _config(rollout: str, **backends: str) -> Any:
    sections = {role: types.SimpleNamespace(backend=b) for role, b in backends.items()}
    return types.SimpleNamespace(rollout=types.SimpleNamespace(backend=rollout), **sections)


def _spec(trains_on_generations: bool = True, **kinds: str) -> Any:
    return types.SimpleNamespace(
        name="algo", role_names=tuple(kinds), kind_of=kinds.__getitem__,
        trains_on_generations=trains_on_generations, has_policy="policy" in kinds.values(),
    )  # fmt: skip


SPEC = _spec(actor="policy", reference="frozen_policy")


def _prepared(images: bool) -> Any:
    rows = [{"uid": "0", "images": [b"png"] if images else []}]
    loader = types.SimpleNamespace(rows=rows)
    assets = types.SimpleNamespace(model_path=None)  # no model directory to look into
    return types.SimpleNamespace(
        loader=loader, val_loader=None, row_columns=("images",), assets=assets
    )


def test_the_backend_check_names_the_role_and_passes_text_runs() -> None:
    fsdp = {"actor": "fsdp", "reference": "fsdp"}
    assert backend_check(_config("hf_vision", **fsdp), SPEC, _prepared(True)) is None
    on_megatron = {**fsdp, "reference": "megatron"}
    with pytest.raises(HfsdkError, match=r"^reference\.backend=megatron has no vision path"):
        backend_check(_config("hf_vision", **on_megatron), SPEC, _prepared(True))
    # hf_vision with no image in the rows is still refused: it needs a Qwen2-VL-family actor.
    with pytest.raises(HfsdkError, match=r"rollout\.backend=hf_vision generates from images"):
        backend_check(_config("hf_vision", **on_megatron), SPEC, _prepared(False))
    # A text run (text rollout, no images) on megatron is none of this check's business.
    assert backend_check(_config("hf", **on_megatron), SPEC, _prepared(False)) is None
    # A rollout pool: refused for an hf_vision rollout too, images or not; not for a text run.
    pool = types.SimpleNamespace(pools={"global": None, "rollout": None})
    for images, why in ((True, "the prompts carry images (column 'images')"),
                        (False, "rollout.backend=hf_vision generates from images")):  # fmt: skip
        config = _config("hf_vision", **fsdp)
        config.placement = pool
        with pytest.raises(HfsdkError) as info:
            backend_check(config, SPEC, _prepared(images))
        assert str(info.value) == POOL_REFUSAL.format(why=why)
    text = _config("hf", **fsdp)
    text.placement = pool
    assert backend_check(text, SPEC, _prepared(False)) is None


@pytest.mark.parametrize("rollout", ["hf_vision", "hf"])
def test_sft_on_image_rows_is_one_line_without_hf_vision_advice(
    tmp_path: Path,
    vlm_dir: Path,
    capsys: pytest.CaptureFixture[str],
    no_workers: None,
    rollout: str,
) -> None:
    # SFT trains on the dataset's responses: the hf_vision rollout never feeds its forward, so
    # the run trained on the text alone (hf_vision) or was told to switch to hf_vision (hf).
    _need("algorithms", "sft")
    train = write_parquet(shapes_rows(4, seed=0), tmp_path / "train.parquet")
    err = _refused(
        tmp_path,
        capsys,
        f"actor.model_path={vlm_dir}",
        f"data.train_files=[{train}]",
        f"rollout.backend={rollout}",
        "algorithm.response_key=answer",
        algo="sft",
    )
    assert "algorithm sft trains on the dataset's responses and generates nothing" in err
    assert "hf_vision" not in err


def test_ppo_on_image_rows_names_the_critic(
    tmp_path: Path, vlm_dir: Path, capsys: pytest.CaptureFixture[str], no_workers: None
) -> None:
    # The critic's AutoModelForTokenClassification failed on the Qwen2-VL config after the
    # workers started.
    _need("algorithms", "ppo")
    train = write_parquet(shapes_rows(4, seed=0), tmp_path / "train.parquet")
    err = _refused(
        tmp_path,
        capsys,
        f"actor.model_path={vlm_dir}",
        f"data.train_files=[{train}]",
        "rollout.backend=hf_vision",
        REWARD,
        algo="ppo",
    )
    assert "algorithm ppo's critic role (a value model) has no vision path" in err
    assert err.endswith("use grpo or remax (no critic) or a text-only dataset")


@pytest.mark.parametrize(
    ("spec", "pattern"),
    [
        (
            _spec(False, actor="policy", reference="frozen_policy"),
            r"algorithm algo trains on the dataset's responses and generates nothing",
        ),
        (_spec(reward_model="score_model"), r"generates nothing"),
        (
            _spec(actor="policy", critic="value", reference="frozen_policy"),
            r"algo's critic role \(a value model\) has no vision path",
        ),
    ],
    ids=["sft-like", "reward-model", "ppo-like"],
)
def test_algorithms_blind_to_images_are_refused(spec: Any, pattern: str) -> None:
    from hfsdk_vision.preflight import images_check

    fsdp = _config("hf_vision", actor="fsdp", reference="fsdp", critic="fsdp")
    for check in (images_check, backend_check):
        with pytest.raises(HfsdkError, match=pattern):
            check(fsdp, spec, _prepared(True))
    # Text rows: nothing to refuse.
    assert backend_check(_config("hf", actor="fsdp"), spec, _prepared(False)) is None


@pytest.mark.parametrize("algo", ["sft", "dpo"])
def test_the_installed_response_trainers_say_they_generate_nothing(algo: str) -> None:
    _need("algorithms", algo)
    assert get_registry("algorithms")[algo].impl.trains_on_generations is False


def test_vllm_still_cannot_load_qwen2_vl_here() -> None:
    """The fact the ``vllm`` refusal states (docs/multimodal.md, "vLLM"): vLLM's Qwen2-VL module
    needs torchvision, which this CPU torch cannot import. When this fails, vLLM may load the
    model: check generation from an image and revisit the refusal."""
    pytest.importorskip("vllm")
    with pytest.raises(ModuleNotFoundError) as info:
        import vllm.model_executor.models.qwen2_vl  # noqa: F401
    assert info.value.name == "torchvision"


def _images_run(model_path: Path, rows: list[dict[str, Any]]) -> tuple[Any, Any]:
    """``(config, prepared)`` of an hf_vision run on ``rows`` as the image checks see them."""
    config = types.SimpleNamespace(
        rollout=types.SimpleNamespace(backend="hf_vision"),
        actor=types.SimpleNamespace(model_path=str(model_path), backend="fsdp"),
        reference=types.SimpleNamespace(backend="fsdp"),
    )
    prepared = types.SimpleNamespace(
        loader=types.SimpleNamespace(rows=rows),
        val_loader=None,
        row_columns=tuple(rows[0]),
        assets=types.SimpleNamespace(model_path=str(model_path)),
    )
    return config, prepared


@pytest.mark.parametrize(
    ("value", "kind"), [("a.png", "str"), ({"bytes": b"x", "path": None}, "dict")]
)
def test_an_images_value_that_is_not_a_list_is_refused_before_the_run(
    vlm_dir: Path, value: object, kind: str
) -> None:
    # A path was read character by character ('a', '.', ...), a struct by its keys.
    rows = [{"uid": "7", "prompt": "<image> a", "rendered_prompt": "<image> a", "images": value}]
    config, prepared = _images_run(vlm_dir, rows)
    with pytest.raises(HfsdkError) as err:
        images_check(config, SPEC, prepared)
    assert str(err.value) == (
        f"train data: row 7: images must be a list of images per row (got a {kind}); "
        "wrap it in a list"
    )


def test_an_hf_vision_model_without_an_image_processor_is_one_line(
    vlm_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], no_workers: None
) -> None:
    # It failed once the workers started, in transformers' words about the Hub.
    import shutil

    bare = tmp_path / "model"
    shutil.copytree(vlm_dir, bare)
    (bare / "preprocessor_config.json").unlink()
    train = write_parquet(shapes_rows(4, seed=0), tmp_path / "train.parquet")
    err = _refused(
        tmp_path,
        capsys,
        f"actor.model_path={bare}",
        f"data.train_files=[{train}]",
        "rollout.backend=hf_vision",
        REWARD,
    )
    assert err.startswith(f"Error: actor.model_path={bare} has no preprocessor_config.json, ")
    config, prepared = _images_run(vlm_dir, [{"uid": "0", "rendered_prompt": "a", "images": []}])
    assert backend_check(config, SPEC, prepared) is None  # the directory has one


@pytest.mark.parametrize("rollout", ["hf", "hf_vision"])
@pytest.mark.parametrize(
    "columns", [("uid", "rendered_prompt"), ("uid", "rendered_prompt", "images")]
)
def test_an_image_placeholder_without_images_is_refused(
    rollout: str, columns: tuple[str, ...]
) -> None:
    # TRL parts with the image inline became a bare <image>: the run trained on text alone.
    rows = [{"uid": "3", "rendered_prompt": "<image> what colour?", "images": []}]
    prepared = types.SimpleNamespace(
        loader=types.SimpleNamespace(rows=[{k: r[k] for k in columns} for r in rows]),
        val_loader=None,
        row_columns=columns,
        assets=types.SimpleNamespace(model_path=None),
    )
    config = _config(rollout, actor="fsdp", reference="fsdp")
    with pytest.raises(HfsdkError) as info:
        images_check(config, SPEC, prepared)
    assert str(info.value).startswith(
        "train data: row 3: the prompt has an <image> placeholder but the dataset carries no images"
    )


@pytest.mark.parametrize("value", ["imgs/0.png", Path("imgs/0.png")])
def test_trls_single_image_column_holding_a_path_is_refused(value: object) -> None:
    # Only bytes, dicts and PIL images counted: a path string passed and trained on text alone.
    from hfsdk_vision.preflight import refuse_single_image_column

    with pytest.raises(HfsdkError, match=r"^the prompts carry images in TRL's single 'image'"):
        refuse_single_image_column([{"image": None}, {"image": value}])
    refuse_single_image_column([{"image": None}, {"image": ""}])  # no image in any row


def test_a_broken_image_of_one_of_several_files_names_the_file_and_its_row(
    tmp_path: Path,
) -> None:
    # It was "train data: row 10, image 0 could not be decoded (cannot identify image file
    # <_io.BytesIO object at 0x...>)": a row number of all files together, and no file.
    good = write_parquet(shapes_rows(3, seed=0), tmp_path / "good.parquet")
    bad_rows = shapes_rows(3, seed=1)
    bad_rows[1]["images"] = [{"bytes": b"not an image", "path": None}]
    bad = write_parquet(bad_rows, tmp_path / "bad.parquet")
    rows = [
        {"uid": index, "rendered_prompt": row["prompt"][0]["content"], "images": row["images"]}
        for index, row in enumerate([*shapes_rows(3, seed=0), *bad_rows])
    ]
    config = _config("hf_vision", actor="fsdp", reference="fsdp")
    config.data = types.SimpleNamespace(train_files=[str(good), str(bad)], val_files=[])
    prepared = types.SimpleNamespace(
        loader=types.SimpleNamespace(rows=rows),
        val_loader=None,
        row_columns=tuple(rows[0]),
        assets=types.SimpleNamespace(model_path=None),
    )
    with pytest.raises(HfsdkError) as info:
        images_check(config, SPEC, prepared)
    assert str(info.value).startswith(
        f"train data: {bad}: row 1, image 0 could not be decoded (not an image file)"
    )
