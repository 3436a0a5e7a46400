"""Training sessions: default-task assets, signals, and placement chosen by the planner."""

from __future__ import annotations

import pytest

from hfsdk.core.config import load_run_config
from hfsdk.core.errors import HfsdkError
from hfsdk.core.trainer.session import TrainingSession, _signal_config, worker_threads


def test_default_task_fills_in_the_signals() -> None:
    config = load_run_config("safe_rlhf")
    assert [f.name for f in _signal_config(config, "reward", True).functions] == ["default_task"]
    assert [f.name for f in _signal_config(config, "cost", True).functions] == ["default_task_cost"]
    with pytest.raises(HfsdkError, match="neither functions nor a model"):
        _signal_config(config, "reward", False)


@pytest.mark.distributed
def test_auto_placement_builds_the_planned_pools() -> None:
    from hfsdk.core.placement.auto import auto_placement_section

    config = load_run_config(
        "grpo", None, ["placement.mode=auto", "placement.pools={global: {devices: 2}}"]
    )
    with TrainingSession(config, ("actor", "reference", "reward")) as session:
        plan = auto_placement_section(
            "grpo", model_size=session.assets.model_path, num_devices=2, cluster="local"
        )
        for role in ("actor", "reference"):
            group = session.groups[role]
            pool = plan["roles"][role]
            assert group.pool.name == pool
            assert group.world_size == plan["pools"][pool]["devices"]


def test_a_backend_without_a_worker_class_is_refused_before_ray_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import types

    import hfsdk.core.registry as registry

    config = load_run_config("grpo", None, ["actor.backend=megatron"])
    real = registry.get_registry

    def backends_without_workers(kind: str) -> object:
        # A backend registered with something that is not a Worker class (config only).
        if kind == "training_backends":
            return {name: types.SimpleNamespace(impl=object(), plugin="p") for name in real(kind)}
        return real(kind)

    monkeypatch.setattr(registry, "get_registry", backends_without_workers)
    session = TrainingSession(config, ("actor", "reference", "reward"))
    with pytest.raises(HfsdkError, match=r"backend 'megatron' .* registers no worker class"):
        session.__enter__()


def test_worker_threads_share_the_cores_among_device_slots(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert worker_threads(0, 1, cores=16) == 16  # one worker: every core, as TRL uses
    assert worker_threads(0, 3, cores=16) == 5
    assert worker_threads(0, 32, cores=16) == 1
    assert worker_threads(6, 3, cores=16) == 6  # configured wins
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # the controller's cap (tests, shared machines)
    assert worker_threads(0, 1, cores=16) == 2
    assert worker_threads(8, 1, cores=16) == 8
