"""``hfsdk config import --from verl`` on a vision-language GRPO command (issue 39).

The command is in the shape of verl's ``examples/grpo_trainer/run_qwen2_5_vl-7b.sh`` (geo3k,
Qwen2.5-VL, vLLM) with the vision tower frozen. It imports to the vision plugin's rollout
(``hf_vision``) and ``actor.freeze_vision``, and a text command keeps its rollout.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from hfsdk import get_registry, reset_plugin_manager
from hfsdk.core.cli.main import main
from hfsdk.core.config import resolve_run_config
from hfsdk_migration.importing import import_config, read_source, without_source_paths

FIXTURES = Path(__file__).parent / "fixtures"
DOC = Path(__file__).resolve().parents[4] / "docs" / "multimodal.md"
ENV = {"HOME": "/home/u"}
R = "actor_rollout_ref.rollout."
VL_GRPO = """\
set -x
ENGINE=${1:-vllm}

python3 -m verl.trainer.main_ppo \\
    algorithm.adv_estimator=grpo \\
    data.train_files=$HOME/data/geo3k/train.parquet \\
    data.val_files=$HOME/data/geo3k/test.parquet \\
    data.train_batch_size=512 \\
    data.max_prompt_length=1024 \\
    data.max_response_length=2048 \\
    data.filter_overlong_prompts=True \\
    data.truncation='error' \\
    data.image_key=images \\
    actor_rollout_ref.model.path=Qwen/Qwen2.5-VL-7B-Instruct \\
    actor_rollout_ref.actor.optim.lr=1e-6 \\
    actor_rollout_ref.model.use_remove_padding=True \\
    actor_rollout_ref.actor.ppo_mini_batch_size=128 \\
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=10 \\
    actor_rollout_ref.actor.use_kl_loss=True \\
    actor_rollout_ref.actor.kl_loss_coef=0.01 \\
    actor_rollout_ref.actor.kl_loss_type=low_var_kl \\
    actor_rollout_ref.actor.entropy_coeff=0 \\
    actor_rollout_ref.actor.freeze_vision_tower=True \\
    actor_rollout_ref.model.enable_gradient_checkpointing=True \\
    actor_rollout_ref.actor.fsdp_config.param_offload=False \\
    actor_rollout_ref.actor.fsdp_config.optimizer_offload=False \\
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=20 \\
    actor_rollout_ref.rollout.tensor_model_parallel_size=2 \\
    actor_rollout_ref.rollout.name=$ENGINE \\
    actor_rollout_ref.rollout.engine_kwargs.vllm.disable_mm_preprocessor_cache=True \\
    actor_rollout_ref.rollout.gpu_memory_utilization=0.6 \\
    actor_rollout_ref.rollout.enable_chunked_prefill=False \\
    actor_rollout_ref.rollout.enforce_eager=False \\
    actor_rollout_ref.rollout.free_cache_engine=False \\
    actor_rollout_ref.rollout.n=5 \\
    actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=20 \\
    actor_rollout_ref.ref.fsdp_config.param_offload=True \\
    algorithm.use_kl_in_reward=False \\
    trainer.critic_warmup=0 \\
    trainer.logger=['console','wandb'] \\
    trainer.project_name='verl_grpo_example_geo3k' \\
    trainer.experiment_name='qwen2_5_vl_7b_function_rm' \\
    trainer.n_gpus_per_node=8 \\
    trainer.nnodes=1 \\
    trainer.save_freq=20 \\
    trainer.test_freq=5 \\
    trainer.total_epochs=15 $@
"""
"""A verl Qwen2.5-VL GRPO command (run_qwen2_5_vl-7b.sh's keys, the tower frozen)."""
ENGINE_REASON = (
    "(a vLLM engine setting: with images hfsdk generates with transformers on the actor's "
    "weights (rollout.backend=hf_vision))"
)


@pytest.fixture
def needs_vision() -> None:
    """Skip where the vision plugin (its ``hf_vision`` rollout) is not installed."""
    if "hf_vision" not in get_registry("rollout_backends"):
        pytest.skip("the vision plugin (hfsdk-plugin-vision) is not installed")


def _import(tmp_path: Path, script: str = VL_GRPO, *args: str) -> tuple[Any, Any]:
    path = tmp_path / "run_qwen2_5_vl-7b.sh"
    path.write_text(script)
    data, warnings = read_source("verl", str(path), list(args), env=ENV)
    result = import_config("verl", data, warnings=warnings)
    # As the importer validates it: the model path names the source machine's directory.
    return result, resolve_run_config(None, without_source_paths(result.config))


@pytest.mark.usefixtures("needs_vision")
def test_a_verl_vl_grpo_command_imports_to_the_image_rollout(tmp_path: Path) -> None:
    result, cfg = _import(tmp_path)
    assert cfg.algo == "grpo" and cfg.rollout.backend == "hf_vision"
    assert cfg.actor.freeze_vision is True and cfg.actor.gradient_checkpointing
    assert result.config["actor"]["model_path"] == "Qwen/Qwen2.5-VL-7B-Instruct"
    # The rest maps as for a text command: 128 prompts x 5 samples, the KL loss, the lengths.
    assert cfg.algorithm.n_samples_per_prompt == 5 and cfg.actor.mini_batch_size == 640
    assert cfg.actor.micro_batch_size == 10 and cfg.actor.forward_micro_batch_size == 20
    assert cfg.algorithm.kl_loss_coef == 0.01 and cfg.algorithm.kl_estimator == "low_var_kl"
    assert cfg.data.batch_size == 512 and cfg.data.max_prompt_length == 1024
    assert cfg.rollout.max_prompt_length == 1024 and cfg.rollout.max_response_length == 2048
    assert cfg.data.train_files == ("/home/u/data/geo3k/train.parquet",)
    # No vLLM setting and no generation layout reach the image rollout's config.
    assert set(result.config["rollout"]) == {"backend", "max_response_length", "temperature"}
    assert "rollout_layout" not in result.config["actor"]
    assert result.unmapped == (
        "actor_rollout_ref.ref.fsdp_config.param_offload = True  (no counterpart: hfsdk keeps "
        "each role's weights, gradients and optimizer state on its devices (rollout.sleep frees "
        "vLLM's memory while the actor trains))",
        f"{R}dtype = 'bfloat16'  {ENGINE_REASON}",  # verl's default, composed in
        f"{R}gpu_memory_utilization = 0.6  {ENGINE_REASON}",
        f"{R}tensor_model_parallel_size = 2  (rollout.backend=hf_vision generates on the "
        "actor's module without tensor parallelism)",
        f"{R}max_num_seqs = 256  {ENGINE_REASON}",  # verl's default, composed in
        "trainer.total_epochs = 15  (hfsdk counts steps: set trainer.total_steps = total_epochs "
        "x rows // data.train_batch_size (the train files are not here to count))",
        "critic.* (15 keys)  (algorithm 'grpo' has no critic)",
        f"{R}engine_kwargs.* (1 key)  (hfsdk decides this itself (an engine performance setting))",
    )


@pytest.mark.usefixtures("needs_vision")
def test_the_tower_trains_unless_frozen_and_the_engine_name_does_not_matter(
    tmp_path: Path,
) -> None:
    script = VL_GRPO.replace("    actor_rollout_ref.actor.freeze_vision_tower=True \\\n", "")
    assert script != VL_GRPO
    for engine in ("vllm", "sglang", "hf"):
        result, cfg = _import(tmp_path, script.replace("name=$ENGINE", f"name={engine}"))
        assert cfg.rollout.backend == "hf_vision" and cfg.actor.freeze_vision is False
        assert "freeze_vision" not in result.config["actor"]
        assert not any("rollout.name" in line for line in result.unmapped)


@pytest.mark.usefixtures("needs_vision")
def test_a_vl_model_is_told_by_its_directory_or_its_data_when_its_name_says_nothing(
    tmp_path: Path,
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    text_model = "actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct"
    script = VL_GRPO.replace("    actor_rollout_ref.actor.freeze_vision_tower=True \\\n", "")
    script = script.replace("actor_rollout_ref.model.path=Qwen/Qwen2.5-VL-7B-Instruct", text_model)
    _, cfg = _import(tmp_path, script)
    assert cfg.rollout.backend == "vllm"  # a text model, files not here: verl's engine
    # A local model directory whose config has a vision tower.
    model = tmp_path / "ckpt"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"vision_config": {"depth": 1}}))
    _, cfg = _import(tmp_path, script, f"actor_rollout_ref.model.path={model}")
    assert cfg.rollout.backend == "hf_vision"
    (model / "config.json").write_text(json.dumps({"model_type": "qwen2"}))
    _, cfg = _import(tmp_path, script, f"actor_rollout_ref.model.path={model}")
    assert cfg.rollout.backend == "vllm"
    # Train files here that carry the images column (data.image_key).
    train = tmp_path / "train.parquet"
    pq.write_table(pa.table({"prompt": ["<image> what ?"], "images": [[b"png"]]}), train)
    _, cfg = _import(tmp_path, script, f"data.train_files={train}")
    assert cfg.rollout.backend == "hf_vision"
    pq.write_table(pa.table({"prompt": ["3 + 5 ="]}), train)
    _, cfg = _import(tmp_path, script, f"data.train_files={train}")
    assert cfg.rollout.backend == "vllm"


@pytest.mark.usefixtures("needs_vision")
def test_another_image_column_name_is_listed_with_what_to_do(tmp_path: Path) -> None:
    result, cfg = _import(tmp_path, VL_GRPO, "data.image_key=image")
    assert cfg.rollout.backend == "hf_vision"
    assert (
        "data.image_key = 'image'  (hfsdk reads a row's images from the column 'images' only; "
        "rename the column 'image' to 'images' in the parquet files)"
    ) in result.unmapped


def test_without_the_vision_plugin_the_engine_name_is_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HFSDK_DISABLE_PLUGINS", "vision")
    reset_plugin_manager()
    result, cfg = _import(tmp_path)
    assert "backend" not in result.config["rollout"] and cfg.rollout.backend != "hf_vision"
    assert (
        "actor_rollout_ref.rollout.name = 'vllm'  (a vision-language model: install "
        "hfsdk-plugin-vision for rollout.backend=hf_vision)"
    ) in result.unmapped
    assert cfg.actor.freeze_vision is True  # the fsdp backend's key, not the plugin's


def test_a_text_command_keeps_its_rollout() -> None:
    data, warnings = read_source("verl", str(FIXTURES / "verl_run_grpo_fsdp_vllm.sh"), [], env=ENV)
    result = import_config("verl", data, warnings=warnings)
    assert result.config["rollout"]["backend"] == "vllm"
    assert "rollout_layout" not in result.config["actor"]  # vLLM on FSDP generates at tp 1
    assert "freeze_vision" not in result.config["actor"]
    # verl's whole tree sets image_key=images and freeze_vision_tower=false in text configs too.
    data, _ = read_source("verl", str(FIXTURES / "verl_generated_ppo_trainer.yaml"), [], env=ENV)
    assert data["data"]["image_key"] == "images"
    result = import_config("verl", data)
    assert "backend" not in result.config["rollout"]  # the tree's rollout.name is ???
    assert "freeze_vision" not in result.config["actor"]
    assert not any("image_key" in line or "vision" in line for line in result.unmapped)


@pytest.mark.usefixtures("needs_vision")
def test_the_multimodal_docs_import_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/multimodal.md's ``hfsdk config import`` session and run.yaml excerpt, as written."""
    text = DOC.read_text()
    (session,) = re.findall(r"```\n(\$ hfsdk config import --from verl .*?)```", text, re.S)
    (excerpt,) = re.findall(r"```\n(# run\.yaml.*?)```", text, re.S)
    command, *shown = session.splitlines()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", "/home/u")
    (tmp_path / "run_qwen2_5_vl-7b.sh").write_text(VL_GRPO)
    with pytest.raises(SystemExit) as info:
        main(shlex.split(command.removeprefix("$ hfsdk ")))
    out, err = capsys.readouterr()
    assert info.value.code in (0, None), err
    assert out.splitlines() == shown
    written = yaml.safe_load((tmp_path / "run.yaml").read_text())
    _assert_within(yaml.safe_load(excerpt), written)


def _assert_within(part: Any, whole: Any, where: str = "run.yaml") -> None:
    """Every key of ``part`` is in ``whole`` with the same value."""
    if isinstance(part, dict):
        assert isinstance(whole, dict), where
        for key, value in part.items():
            assert key in whole, f"{where}.{key}"
            _assert_within(value, whole[key], f"{where}.{key}")
    else:
        assert part == whole, where


@pytest.mark.usefixtures("needs_vision")
def test_a_megatron_actor_lists_the_frozen_tower(tmp_path: Path) -> None:
    result, cfg = _import(tmp_path, VL_GRPO, "actor_rollout_ref.actor.strategy=megatron")
    assert result.config["actor"]["backend"] == "megatron" and cfg.rollout.backend == "hf_vision"
    assert "freeze_vision" not in result.config["actor"]
    assert (
        "actor_rollout_ref.actor.freeze_vision_tower = True  (the megatron backend has no "
        "actor.freeze_vision (the fsdp backend has))"
    ) in result.unmapped


@pytest.mark.usefixtures("needs_vision")
@pytest.mark.parametrize("version", ["0.9.1", "0.5.0"])
def test_verls_own_tree_composes_the_vl_command(tmp_path: Path, version: str) -> None:
    """On verl's shipped ``ppo_trainer`` (``make setup`` installs it; skipped without it)."""
    import sys

    config_dir = Path(sys.prefix) / "verl" / version / "verl" / "trainer" / "config"
    if not (config_dir / "ppo_trainer.yaml").is_file():
        pytest.skip(f"verl {version} is not in {config_dir.parents[2]}; run `make setup`")
    # verl 0.9.1 has no engine_kwargs.vllm.disable_mm_preprocessor_cache (verl refuses it too),
    # verl 0.5.0 no freeze_vision_tower: each release gets the keys it defines.
    script = VL_GRPO.replace(
        "    actor_rollout_ref.rollout.engine_kwargs.vllm.disable_mm_preprocessor_cache=True \\\n",
        "",
    )
    if version == "0.5.0":
        script = script.replace("    actor_rollout_ref.actor.freeze_vision_tower=True \\\n", "")
    path = tmp_path / "run_qwen2_5_vl-7b.sh"
    path.write_text(script)
    data, warnings = read_source("verl", str(path), [], verl_config_dir=[str(config_dir)], env=ENV)
    assert data["data"]["image_key"] == "images"  # verl's default, composed in
    assert data["actor_rollout_ref"]["rollout"]["top_k"] == -1
    result = import_config("verl", data, warnings=warnings)
    cfg = resolve_run_config(None, without_source_paths(result.config))
    assert cfg.rollout.backend == "hf_vision" and cfg.actor.mini_batch_size == 640
    assert cfg.actor.freeze_vision is (version == "0.9.1")
    assert f"actor_rollout_ref.rollout.gpu_memory_utilization = 0.6  {ENGINE_REASON}" in (
        result.unmapped
    )
    joined = "\n".join(result.unmapped)
    # top_p 1 and top_k -1 are off; image_key=images and the tower's switch are mapped.
    for key in (R + "top_p", R + "top_k", "data.image_key", "freeze_vision_tower"):
        assert key not in joined
