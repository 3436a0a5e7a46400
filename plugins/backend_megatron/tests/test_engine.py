"""The megatron engine's checkpoint restore, on a stand-in engine (no process group, no model)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from hfsdk_backend_common.optim_config import OptimConfig
from hfsdk_backend_megatron.engine import SHARD_FILE, MegatronEngine


def _restored(tmp_path: Path, device: str, **adamw: Any) -> torch.optim.Optimizer:
    """AdamW(**adamw) over a Linear on ``device``, restored from a one-shard checkpoint."""
    model = torch.nn.Linear(2, 2, device=device)
    optimizer = torch.optim.AdamW(model.parameters(), **adamw)
    saved = {name: torch.ones_like(p, device="cpu") for name, p in model.named_parameters()}
    state = {
        "layout": {"tp": 1, "pp": 1},
        "model": saved,
        "optimizer": {
            "moments": {n: {"exp_avg": t, "exp_avg_sq": t} for n, t in saved.items()},
            "step": 3.0,
            "groups": [
                {k: v for k, v in g.items() if k != "params"} for g in optimizer.param_groups
            ],
        },
        "scheduler": None,
        "update_calls": 3,
    }
    torch.save(state, tmp_path / SHARD_FILE.format(role="actor", pp=0, tp=0))
    engine = SimpleNamespace(
        role="actor", pp_rank=0, tp_rank=0, tp=1, pp=1, model=model, optimizer=optimizer,
        device=torch.device(device), config=SimpleNamespace(optim=OptimConfig()),
        scheduler=SimpleNamespace(load_state_dict=lambda _state: None), weights_version=0,
    )  # fmt: skip
    MegatronEngine.load_checkpoint(engine, tmp_path)
    return optimizer


@pytest.mark.parametrize(
    ("device", "adamw"), [("cpu", {"fused": True}), ("meta", {"capturable": True})]
)
def test_the_restored_adam_step_is_on_the_parameters_device_for_fused_adamw(
    tmp_path: Path, device: str, adamw: dict[str, Any]
) -> None:
    # A fused (or capturable) AdamW steps with `step` on the parameter's device, as torch's own
    # load_state_dict puts it; before, the restore left it on the CPU under a CUDA parameter.
    # No CUDA here: the meta device stands in for a device other than the CPU.
    optimizer = _restored(tmp_path, device, **adamw)
    for param, state in optimizer.state.items():
        assert state["step"].device == param.device and state["step"].dtype == torch.float32
        if device == "cpu":  # a meta tensor holds no value
            assert float(state["step"]) == 3.0


def test_the_restored_adam_step_stays_on_the_cpu_for_unfused_adamw(tmp_path: Path) -> None:
    # torch's for-each and single-tensor AdamW keep `step` on the CPU (its load_state_dict too).
    optimizer = _restored(tmp_path, "cpu", foreach=False)
    assert all(s["step"].device.type == "cpu" for s in optimizer.state.values())
