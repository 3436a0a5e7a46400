"""A damaged DCP checkpoint is reported once, by hfsdk: none of DCP's traceback warnings."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from hfsdk import HfsdkError
from hfsdk_backend_fsdp.actor import ActorEngine
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig


def test_a_truncated_metadata_file_logs_no_traceback(
    model_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture
) -> None:
    config = FSDPRoleConfig(model_path=str(model_dir), mini_batch_size=2, micro_batch_size=2)
    ActorEngine(config, role="actor").save_checkpoint(tmp_path / "ckpt")
    metadata = tmp_path / "ckpt" / "actor_dcp" / ".metadata"
    metadata.write_bytes(metadata.read_bytes()[: metadata.stat().st_size // 2])
    engine = ActorEngine(config, role="actor")
    dcp_logger = logging.getLogger("torch.distributed.checkpoint")
    before = (list(logging.getLogger().filters), dcp_logger.level)
    capfd.readouterr()
    with caplog.at_level(logging.DEBUG), pytest.raises(HfsdkError, match="cannot be read"):
        engine.load_checkpoint(tmp_path / "ckpt")
    # Before: "Global metadata is not found. Falling back to rank local metadata." and
    # "Rank local metadata is not found.", each with a traceback (about 30 lines).
    # DCP's structured event logger (c10d-NullHandler-dcp_logger) does not propagate and is
    # never shown; an earlier test in the same process may have turned its propagation on.
    shown = [
        r
        for r in caplog.records
        if (r.levelno >= logging.WARNING or r.exc_info) and not r.name.startswith("c10d-")
    ]
    assert not [r.getMessage() for r in shown if r.exc_info or "metadata" in r.getMessage()]
    assert "Traceback" not in capfd.readouterr().err
    assert (list(logging.getLogger().filters), dcp_logger.level) == before  # restored
