"""Fault injection: silent unless asked, then exactly where asked, through the core's
``take_fault`` (the ``hfsdk_fault_point`` hook) and the plugin's step observer."""

from __future__ import annotations

import errno
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

import hfsdk
from hfsdk import get_registry, load_run_config, take_fault
from hfsdk_faults import faults
from hfsdk_faults.faults import FAULT_ENV, FaultObserver, fault_requested, maybe_fault


def test_only_the_named_point_and_step_fire(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(FAULT_ENV, raising=False)
    assert not fault_requested("save_mid", 2)
    monkeypatch.setenv(FAULT_ENV, "save_mid:2, step_end:5")
    assert fault_requested("save_mid", 2) and fault_requested("step_end", 5)
    assert not fault_requested("save_mid", 3) and not fault_requested("metrics_mid", 2)


def test_enospc_points_raise_a_full_disk_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FAULT_ENV, "save_enospc:1")
    with pytest.raises(OSError) as info:
        maybe_fault("save_enospc", 1)
    assert info.value.errno == errno.ENOSPC


def test_kill_points_end_the_process_with_sigkill() -> None:
    code = "from hfsdk_faults.faults import maybe_fault; maybe_fault('step_end', 3)"
    done = subprocess.run(
        [sys.executable, "-c", code], env={FAULT_ENV: "step_end:3"}, capture_output=True
    )
    assert done.returncode == -9


def test_the_plugin_registers_its_observer_built_only_when_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    entry = get_registry("step_observers")["faults"]
    assert entry.plugin == "faults"
    monkeypatch.delenv(FAULT_ENV, raising=False)
    assert entry.impl(load_run_config("grpo"), Path(".")) is None  # off: nothing per step
    monkeypatch.setenv(FAULT_ENV, "step_end:9")
    assert isinstance(entry.impl(load_run_config("grpo"), Path(".")), FaultObserver)


def test_take_fault_asks_the_plugin_once_per_point_and_only_when_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(faults, "_FIRED", set())
    monkeypatch.delenv(FAULT_ENV, raising=False)
    assert not take_fault("sync_drop", 2)
    monkeypatch.setenv(FAULT_ENV, "sync_drop:2,save_enospc:2")
    assert not take_fault("sync_drop", 1)
    assert take_fault("sync_drop", 2) and not take_fault("sync_drop", 2)  # once per process
    with pytest.raises(OSError):  # an acting point: the plugin raises there itself
        take_fault("save_enospc", 2)


def test_the_docs_example_works_as_written() -> None:
    doc = Path(__file__).resolve().parents[3] / "docs" / "plugin_hooks.md"
    section = re.search(r"^## hfsdk_fault_point\n(.*?)(?=^## |\Z)", doc.read_text(), re.M | re.S)
    assert section, "hfsdk_fault_point is not documented"
    blocks = re.findall(r"```python\n(.*?)```", section.group(1), re.S)
    module = types.ModuleType("doc_example")
    module.__dict__["hfsdk"] = hfsdk
    exec(compile(blocks[1], str(doc), "exec"), module.__dict__)
    assert module.hfsdk_fault_point("sync_drop", 3) and module.hfsdk_fault_point("sync_drop", 4)
    assert module.hfsdk_fault_point("sync_drop", 2) is None
    assert module.hfsdk_fault_point("sync_skip", 3) is None


@pytest.mark.parametrize("value", ["step_edn:1", "step_end", "step_end:x", "sync_drop:1,oops:2"])
def test_a_fault_no_point_answers_to_is_refused_before_the_run(
    value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hfsdk import HfsdkError
    from hfsdk.core.trainer.trainer import Trainer

    # Before: the run went on, injected nothing, and the check it served passed.
    monkeypatch.setenv("HFSDK_FAULT_INJECT", value)
    with pytest.raises(HfsdkError, match=r"^HFSDK_FAULT_INJECT has '.*'; expected POINT:STEP"):
        Trainer(load_run_config("grpo", None, ["trainer.total_steps=1"]), tmp_path / "r")
    assert not (tmp_path / "r").exists()


def test_a_step_with_leading_zeros_is_the_same_step(monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: "step_end:03" passed the preflight check (isdigit) but never fired ("03" != "3").
    monkeypatch.setenv(FAULT_ENV, "step_end:03")
    faults.check_fault_points()
    assert fault_requested("step_end", 3) and not fault_requested("step_end", 30)
    code = "from hfsdk_faults.faults import maybe_fault; maybe_fault('step_end', 3)"
    done = subprocess.run(
        [sys.executable, "-c", code], env={FAULT_ENV: "step_end:03"}, capture_output=True
    )
    assert done.returncode == -9


@pytest.mark.parametrize("value", ["step_end:\u00b2", "step_end:-1", "step_end:1.0"])
def test_a_step_that_is_not_a_plain_number_is_refused(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hfsdk import HfsdkError

    monkeypatch.setenv(FAULT_ENV, value)
    with pytest.raises(HfsdkError, match=r"expected POINT:STEP"):
        faults.check_fault_points()


def _step_view(step: int, rollout: object) -> types.SimpleNamespace:
    worker = types.SimpleNamespace(process_info=[{"pid": 2**22 + 12345}])
    session = types.SimpleNamespace(groups={"actor": worker}, rollout=rollout)
    return types.SimpleNamespace(
        session=session, step=step, spec=types.SimpleNamespace(main_role="actor")
    )


def test_rollout_kill_without_a_rollout_pool_is_refused_with_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from hfsdk import HfsdkError

    # Before: the run went on and nothing was killed, so the check it served passed.
    monkeypatch.setattr(faults, "_FIRED", set())
    monkeypatch.setenv(FAULT_ENV, "rollout_kill:2")
    FaultObserver().on_step_start(_step_view(1, None))  # not this step: nothing
    with pytest.raises(HfsdkError, match=r"^HFSDK_FAULT_INJECT=rollout_kill:2 needs") as info:
        FaultObserver().on_step_start(_step_view(2, None))
    assert "\n" not in str(info.value) and "placement.pools.rollout" in str(info.value)


def test_rollout_kill_kills_rank_0_of_the_rollout_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    killed: list[tuple[int, int]] = []
    monkeypatch.setattr(faults, "_FIRED", set())
    monkeypatch.setattr(faults.os, "kill", lambda pid, sig: killed.append((pid, sig)))
    monkeypatch.setenv(FAULT_ENV, "rollout_kill:2")
    rollout = types.SimpleNamespace(process_info=[{"pid": 4242}])
    FaultObserver().on_step_start(_step_view(2, rollout))
    FaultObserver().on_step_start(_step_view(2, rollout))  # once per process
    assert killed == [(4242, faults.signal.SIGKILL)]


@pytest.mark.parametrize(
    ("value", "overrides", "says"),
    [
        ("step_end:5", ["trainer.total_steps=1"], r"trainer\.total_steps=1"),
        ("save_mid:3", ["trainer.total_steps=2"], r"trainer\.total_steps=2"),
        ("sync_drop:4", ["trainer.total_steps=3"], r"trainer\.total_steps=3"),
        ("metrics_mid:3", ["trainer.total_steps=2"], r"trainer\.total_steps=2"),
        ("metrics_mid:1", ["trainer.loggers=[console]"], r"trainer\.loggers.*jsonl"),
        ("step_end:0", [], r"from 1 to 30"),
        ("worker_kill:0", [], r"from 1 to 30"),
        ("sigterm:0", [], r"from 1 to 30"),
        ("save_enospc:0", [], r"from 1 to 30"),
        ("metrics_mid:0", [], r"trainer\.val_before_train=true"),  # no step-0 line
        ("save_mid:3", ["trainer.total_steps=4", "trainer.save_every=2"], r"steps 2, 4"),
        ("save_enospc:2", ["trainer.total_steps=4"], r"save_every=0.*step 4"),  # the last only
    ],
)
def test_a_fault_the_run_can_never_reach_is_refused_before_the_run(
    value: str, overrides: list[str], says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hfsdk import HfsdkError

    # Before: the check read only the item's spelling, so the run exited 0 having
    # injected nothing, and the check the fault served passed.
    monkeypatch.setenv(FAULT_ENV, value)
    with pytest.raises(HfsdkError, match=rf"^HFSDK_FAULT_INJECT has '{value}'.*{says}") as info:
        faults.check_fault_points(load_run_config("grpo", None, overrides))
    assert "\n" not in str(info.value) and "unset HFSDK_FAULT_INJECT" in str(info.value)


@pytest.mark.parametrize(
    ("value", "overrides"),
    [
        ("step_end:2,save_mid:2,sigint:2,metrics_mid:2", ["trainer.total_steps=2"]),
        ("sync_drop:0,sync_skip:2", ["trainer.total_steps=2"]),  # 0: the initial weights' sync
        ("metrics_mid:0", ["trainer.val_before_train=true"]),  # step 0: validation's line
        ("save_mid:2,save_sigterm:4", ["trainer.total_steps=4", "trainer.save_every=2"]),
        ("vllm_drop:40,lora_merge_bad:40,gather_drop:40,reshard_drop:40", []),  # not steps
    ],
)
def test_a_fault_the_run_can_reach_passes_the_check(
    value: str, overrides: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(FAULT_ENV, value)
    faults.check_fault_points(load_run_config("grpo", None, overrides))


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("worker_kill:2", r"worker_kill:2 needs worker processes, but the workers run in the"),
        ("rollout_kill:2", r"rollout_kill:2 needs rollout replicas of their own"),
    ],
)
def test_a_kill_of_worker_processes_is_refused_when_there_are_none(
    value: str, says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: the default run (one device: workers in the controller) failed at step 2."""
    from hfsdk import HfsdkError

    monkeypatch.setenv(FAULT_ENV, value)
    spec = get_registry("algorithms")["grpo"].impl
    with pytest.raises(HfsdkError, match=rf"^HFSDK_FAULT_INJECT={says}"):
        faults.check_fault_points(load_run_config("grpo", None, []), spec)
    if value.startswith("worker_kill"):  # own processes under Ray
        faults.check_fault_points(load_run_config("grpo", None, ["trainer.executor=ray"]), spec)
