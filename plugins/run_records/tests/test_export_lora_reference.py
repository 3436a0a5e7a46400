"""``hfsdk export --role reference`` of a LoRA run writes the base model the reference is.

The reference of a LoRA actor shares the actor's base weights (no copy of its own); its
export used to write nothing while reporting success, leaving an empty ``--out``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from hfsdk import HfsdkError
from hfsdk_run_records.export import check_written

HFSDK = str(Path(sys.executable).parent / "hfsdk")
TOL = 1e-5  # the same fp32 weights, the same ops


def _hfsdk(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("RAY_ADDRESS", None)
    env.pop("HFSDK_FAULT_INJECT", None)
    return subprocess.run([HFSDK, *args], env=env, capture_output=True, text=True, timeout=600)


def _log_probs(model_dir: Path, ids: torch.Tensor) -> torch.Tensor:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    with torch.no_grad():
        logits = model(input_ids=ids).logits.float()
    return torch.log_softmax(logits[:, :-1], -1).gather(-1, ids[:, 1:, None])[..., 0]


@pytest.mark.slow
@pytest.mark.heavy
def test_the_reference_of_a_lora_run_exports_as_the_base_model(tmp_path: Path) -> None:
    from hfsdk import default_task_assets

    run = tmp_path / "run"
    args = ["--quiet", "--run-dir", str(run), "actor.lora.rank=4", "trainer.total_steps=1",
            "data.batch_size=4", "algorithm.n_samples_per_prompt=2",
            "actor.mini_batch_size=4", "actor.micro_batch_size=2"]  # fmt: skip
    done = _hfsdk("run", "--algo", "grpo", *args)
    assert done.returncode == 0, done.stderr[-3000:]
    out = tmp_path / "out"
    done = _hfsdk("export", str(run), "--role", "actor", "--role", "reference", "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    reference = out / "reference"
    assert str(reference) in done.stdout  # the path it names is the one written
    assert (out / "actor" / "adapter_config.json").is_file()
    ids = torch.tensor([[1, 5, 9, 4, 7, 3, 8, 2, 6]])
    base = _log_probs(Path(default_task_assets().model_dir), ids)
    assert (_log_probs(reference, ids) - base).abs().max().item() <= TOL


def test_a_role_whose_export_wrote_no_model_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(HfsdkError) as caught:
        check_written("reference", tmp_path)
    message = str(caught.value)
    assert "\n" not in message and "reference" in message and "config.json" in message
    (tmp_path / "adapter_config.json").write_text("{}")
    check_written("actor", tmp_path)  # a LoRA actor's adapter without its merged model
