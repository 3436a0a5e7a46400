"""The sandbox plugin's seams: its config section (resumable isolation) and its preflight check."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from hfsdk import default_task_assets, get_registry
from hfsdk.core.config import load_run_config
from hfsdk_sandbox.bwrap import unavailable_reason
from hfsdk_sandbox.sandbox_config import SandboxConfig


def test_the_plugin_contributes_the_sandbox_section_and_its_check() -> None:
    entry = get_registry("config_sections")["sandbox"]
    assert entry.impl is SandboxConfig and entry.plugin == "sandbox"
    assert get_registry("preflight_checks")["sandbox_notice"].plugin == "sandbox"
    assert load_run_config("grpo", None, ["sandbox.isolation=process"]).sandbox.isolation == (
        "process"
    )


def test_a_resume_may_change_the_isolation_but_not_other_keys(tmp_path: Path) -> None:
    from hfsdk import HfsdkError
    from hfsdk.core.trainer.trainer import Trainer

    small = ["data.batch_size=4", "actor.mini_batch_size=4", "trainer.executor=local"]
    config = load_run_config("grpo", None, small)
    step = tmp_path / "checkpoints" / "step_1"
    step.mkdir(parents=True)
    (step / "COMPLETE").write_text("1\n")
    torch.save({"step": 1}, step / "trainer_state.pt")
    (tmp_path / "config.yaml").write_text(config.to_yaml())
    Trainer(load_run_config("grpo", None, [*small, "sandbox.isolation=process"]), tmp_path).close()
    with pytest.raises(HfsdkError, match=r"actor\.optim\.lr changed"):
        Trainer(load_run_config("grpo", None, [*small, "actor.optim.lr=0.5"]), tmp_path)


def test_a_run_with_model_code_says_once_when_the_sandbox_cannot_start(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    from hfsdk.core.trainer.preflight import prepare_run

    monkeypatch.setenv("HFSDK_SANDBOX_BWRAP", "/nonexistent/bwrap")
    monkeypatch.setenv("HFSDK_SANDBOX_ISOLATION", "os")
    unavailable_reason.cache_clear()
    try:
        assets = default_task_assets()
        spec = get_registry("algorithms")["grpo"].impl
        config = load_run_config(
            "grpo",
            None,
            [
                f"data.train_files=[{assets.train_files[0]}]",
                "reward.functions=[{name: code_tests, kwargs: {column: answer}}]",
                f"actor.model_path={assets.model_dir}",
                f"reference.model_path={assets.model_dir}",
            ],
        )
        with caplog.at_level(logging.WARNING):
            prepare_run(config, spec)
        lines = [r.getMessage() for r in caplog.records if "sandbox:" in r.getMessage()]
        assert len(lines) == 1 and "\n" not in lines[0]
        assert "sandbox.isolation: process" in lines[0]
    finally:
        unavailable_reason.cache_clear()
