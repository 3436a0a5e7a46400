"""megatron ``gradient_checkpointing``: the same gradients as without it, fewer saved activations."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from hfsdk import HfsdkError
from hfsdk_backend_common.lora_config import LoraConfig
from hfsdk_backend_megatron.megatron_config import MegatronRoleConfig


@pytest.fixture(scope="module")
def grads(tmp_path_factory: pytest.TempPathFactory, tiny_assets: Any, save_tiny_llama: Any) -> Any:
    """Both runs' gradients, computed in a subprocess (megatron's state is per process)."""
    root = tmp_path_factory.mktemp("megatron-recompute")
    model = save_tiny_llama(root / "model", tiny_assets.tokenizer_dir)
    out = root / "grads.pt"
    script = Path(__file__).with_name("recompute_worker.py")
    proc = subprocess.run(
        [sys.executable, "-W", "ignore", str(script), "--model", str(model), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return torch.load(out, weights_only=False)


def test_recompute_gives_the_same_gradients(grads: Any) -> None:
    plain, recompute = grads["plain"], grads["recompute"]
    assert plain.keys() == recompute.keys()
    nonzero = 0
    for name, grad in plain.items():
        # float32, the same kernels in the same order: only the recomputed forward differs
        # (and it runs the same ops), so the gradients agree to float32 rounding.
        torch.testing.assert_close(recompute[name], grad, rtol=1e-5, atol=1e-6, msg=name)
        nonzero += int(grad.abs().sum() > 0)
    assert nonzero >= len(plain) - 1  # every layer took part


def test_recompute_keeps_fewer_activations(grads: Any) -> None:
    saved = grads["saved"]
    # Without recompute every layer's intermediates are kept; with it only layer inputs.
    assert saved["recompute"] < 0.6 * saved["plain"], saved


def test_lora_on_megatron_is_refused_in_one_line() -> None:
    from hfsdk_backend_megatron.engine import MegatronEngine

    config = MegatronRoleConfig(lora=LoraConfig(rank=8))
    with pytest.raises(HfsdkError, match=r"^actor\.lora\.rank=8: LoRA is not supported") as info:
        MegatronEngine(config, role="actor", kind="actor")
    assert "\n" not in str(info.value)
