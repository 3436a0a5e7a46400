"""The megatron worker's checkpoint RNG: CPU, CUDA and the model-parallel tracker round-trip."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from hfsdk_backend_common.worker_checkpoint import RNG_FILE
from hfsdk_backend_megatron.megatron_worker import MegatronWorker
from hfsdk_backend_megatron.rng import TRACKER_KEY, megatron_rng_state, set_megatron_rng_state


class _NoEngine:
    """The worker's engine stand-in: its own checkpoint files are not the subject here."""

    def save_checkpoint(self, path: Path) -> None:
        pass

    def load_checkpoint(self, path: Path) -> None:
        pass


def _worker() -> SimpleNamespace:
    return SimpleNamespace(rank=0, engine=_NoEngine(), _after_load=lambda: None)


def test_checkpoint_rng_holds_cpu_and_cuda_states_and_restores_the_stream(tmp_path: Path) -> None:
    worker = _worker()
    torch.manual_seed(3)
    MegatronWorker.save_checkpoint(worker, str(tmp_path))
    saved = torch.load(tmp_path / RNG_FILE.format(rank=0), weights_only=False)
    # What the GPU path restores must be in the file: a dict with the CUDA generators (None
    # off CUDA) and the tracker's states, not a bare CPU state.
    assert isinstance(saved, dict) and {"cpu", "cuda", TRACKER_KEY} <= set(saved)
    assert torch.equal(saved["cpu"], torch.get_rng_state())
    expected = torch.rand(5)
    torch.rand(7)
    MegatronWorker.load_checkpoint(worker, str(tmp_path))
    assert torch.equal(torch.rand(5), expected)


def test_old_bare_cpu_state_still_loads() -> None:
    torch.manual_seed(4)
    state = torch.get_rng_state()
    expected = torch.rand(3)
    set_megatron_rng_state(state)
    assert torch.equal(torch.rand(3), expected)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_generators_and_tracker_round_trip() -> None:
    from megatron.core.tensor_parallel.random import (
        get_cuda_rng_tracker,
        model_parallel_cuda_manual_seed,
    )

    model_parallel_cuda_manual_seed(1234, tp_rank=0, ep_rank=0, etp_rank=0, force_reset_rng=True)
    tracker = get_cuda_rng_tracker()
    state = megatron_rng_state()
    assert len(state["cuda"]) == torch.cuda.device_count() and state[TRACKER_KEY]
    expected = torch.rand(4, device="cuda")
    with tracker.fork():
        expected_tp = torch.rand(4, device="cuda")
    torch.rand(9, device="cuda")
    with tracker.fork():
        torch.rand(9, device="cuda")
    set_megatron_rng_state(state)
    assert torch.equal(torch.rand(4, device="cuda"), expected)
    with tracker.fork():
        assert torch.equal(torch.rand(4, device="cuda"), expected_tp)
