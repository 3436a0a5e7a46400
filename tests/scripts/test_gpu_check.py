"""scripts/gpu_check.py: the small mode runs end to end; the wheel list fits; plugins are found.

The small mode (``--device cpu --tiny``) is the GPU check at toy sizes: it
must keep running here so the one prepared call on a GPU machine does not
fail on code that a CPU could have caught.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "scripts"
PARTS = {"1", "2", "3", "4", "5"}


def _load(name: str):  # type: ignore[no-untyped-def]
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"_{name}_under_test", SCRIPTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.heavy
@pytest.mark.slow
def test_the_tiny_mode_runs_every_part_and_passes(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, str(SCRIPTS / "gpu_check.py"), "--device", "cpu", "--tiny",
         "--out", str(out), "--workdir", str(tmp_path / "work")],
        capture_output=True, text=True, timeout=1200, cwd=REPO,
        env={**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    report = json.loads((out / "gpu_check.json").read_text())
    assert report["passed"] is True and report["device"] == "cpu" and report["mode"] == "tiny"
    rows = report["rows"]
    assert {r["part"] for r in rows} == PARTS
    assert not [r for r in rows if r["status"] == "fail"]
    checks = {r["check"]: r for r in rows}
    # Part 1 trained 2 steps and measured the stages from metrics.jsonl.
    grpo = checks["GRPO fsdp (float32, hfsdk decoder)"]
    assert grpo["status"] == "pass" and grpo["numbers"]["steps"] == 2
    assert grpo["numbers"]["steady_tokens_per_s"] > 0
    assert {"generation", "update_actor", "ref_log_prob"} <= set(grpo["numbers"]["stages_s"])
    # Part 4 for both backends: exact, and the weights did move between the checkpoints.
    for backend in ("fsdp", "megatron"):
        resume = checks[f"resume 1+1 = 2 steps ({backend})"]
        assert resume["status"] == "pass", resume
        assert resume["numbers"]["max_diff"] == 0.0 and resume["numbers"]["moved"] > 0
    # Part 5: every decoder path, token for token.
    for path in ("fsdp hfsdk decoder", "fsdp transformers decoder", "megatron hybrid rollout"):
        greedy = checks[f"greedy {path} (float32) vs generate"]
        assert greedy["status"] == "pass" and greedy["numbers"]["agreement"] == 1.0
    assert checks["megatron core attention"]["numbers"]["attention"] == ["SDPACoreAttention"]
    # TRL runs when importable, else says why in its row.
    trl = next(r for r in rows if r["part"] == "3" and r["check"].startswith("TRL"))
    assert trl["status"] in ("pass", "skip")
    assert (out / "gpu_check.md").read_text().startswith("| part | check | status | result |")
    assert (out / "logs" / "fsdp.log").exists()


def test_the_full_profile_is_the_issue_s_settings() -> None:
    check = _load("gpu_check")
    full = check.profile("cuda", tiny=False)
    g = full.grpo
    assert (g.batch_size, g.group_size, g.max_response_length, g.steps) == (16, 8, 256, 5)
    assert g.dtype == "bfloat16" and g.device == "cuda" and full.resume.steps == 4
    shape = full.model
    assert (shape["hidden_size"], shape["num_hidden_layers"], shape["num_attention_heads"],
            shape["num_key_value_heads"], shape["intermediate_size"], shape["vocab_size"]) == (
        896, 24, 14, 2, 4864, 151936)  # fmt: skip
    assert shape["tie_word_embeddings"] is True
    task = _load("gpu_check_task")
    assert task.odd_length_share(["p", "p", "p"], ["ab abc", "", "w1 w22"]) == [0.5, 0.0, 0.5]


def test_the_wheel_list_fits_the_limit_and_names_what_the_gpu_machine_lacks() -> None:
    wheels = _load("gpu_wheels").read_list()
    names = {w.requirement.split("==")[0] for w in wheels}
    assert {"megatron-core", "cattrs", "tensordict", "datasets", "trl"} <= names
    assert all(w.filename.endswith(".whl") and ("cp312" in w.filename or "py3" in w.filename)
               for w in wheels)  # fmt: skip
    assert sum(w.size for w in wheels) <= 64 * 2**20


def test_plugins_on_the_path_but_not_installed_get_entry_points(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    check = _load("gpu_check")
    real = metadata.entry_points
    monkeypatch.setattr(metadata, "entry_points", lambda **kw: [])  # as on the GPU machine
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    written = check.ensure_tree_plugins(tmp_path / "site")
    assert {"backend_fsdp", "backend_megatron", "grpo"} <= set(written)
    monkeypatch.setattr(metadata, "entry_points", real)
    found = {
        ep.name: ep.value
        for ep in metadata.entry_points(group="hfsdk")
        if ep.dist is not None and ep.dist.name == "hfsdk-tree-plugins"
    }
    assert found["backend_fsdp"] == "hfsdk_backend_fsdp.plugin"
    assert os.environ["PYTHONPATH"].startswith(str(tmp_path / "site"))


def test_hfsdk_and_its_backends_load_without_ray_or_vllm() -> None:
    """The GPU machine has neither: importing them must wait for a path that needs them."""
    probe = (
        "import sys\n"
        "sys.modules['ray'] = None; sys.modules['vllm'] = None  # import ray -> ImportError\n"
        "import hfsdk\n"
        "from hfsdk.core.plugin_manager import get_plugin_manager, get_registry\n"
        "bad = {p.name: p.error for p in get_plugin_manager().plugins if p.status != 'loaded'}\n"
        "assert not bad, bad\n"
        "assert {'fsdp', 'megatron'} <= set(get_registry('training_backends'))\n"
        "assert 'hf' in get_registry('rollout_backends')\n"
        "import hfsdk_backend_fsdp.fsdp_worker, hfsdk_backend_common.rollout.hf_rollout\n"
        "from hfsdk.core.trainer.trainer import run_training\n"
        "from hfsdk.core.workers import LocalPool\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, cwd=REPO
    )
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]
