"""What a checkpoint that cannot be used says: the rank's own error, not DCP's wrapper."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from transformers import AutoModelForCausalLM

from hfsdk import HfsdkError
from hfsdk_backend_fsdp.actor import ActorEngine
from hfsdk_backend_fsdp.engine import rank_failure
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig


def _engine(model: Path) -> ActorEngine:
    return ActorEngine(
        FSDPRoleConfig(model_path=str(model), mini_batch_size=2, micro_batch_size=2),
        role="actor",
    )


def test_a_model_of_another_shape_is_named_as_the_cause(model_dir: Path, tmp_path: Path) -> None:
    _engine(model_dir).save_checkpoint(tmp_path / "ckpt")
    wider = tmp_path / "wider"
    shutil.copytree(model_dir, wider)
    model = AutoModelForCausalLM.from_pretrained(str(model_dir))
    config = model.config
    config.intermediate_size *= 2
    AutoModelForCausalLM.from_config(config).save_pretrained(str(wider))
    with pytest.raises(HfsdkError) as info:
        _engine(wider).load_checkpoint(tmp_path / "ckpt")
    # Before: "(CheckpointException: CheckpointException ranks:dict_keys([0]))".
    assert "ValueError: Size mismatch between saved" in str(info.value)


def test_the_first_failing_ranks_exception_comes_out_of_dcps_wrapper() -> None:
    from torch.distributed.checkpoint.api import CheckpointException

    class Stop(BaseException):
        pass

    stop = Stop("a second SIGINT")
    wrapped = CheckpointException("save", {1: (ValueError("late"), None), 0: (stop, None)})
    assert rank_failure(wrapped) is stop
