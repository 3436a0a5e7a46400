"""Training sessions: default-task assets, signals, worker threads and executors."""

from __future__ import annotations

import pytest

from hfsdk.core.config import load_run_config
from hfsdk.core.errors import HfsdkError
from hfsdk.core.trainer.run_assets import signal_config_of
from hfsdk.core.trainer.session import TrainingSession, worker_threads


def test_default_task_fills_in_the_signals() -> None:
    config = load_run_config("safe_rlhf")
    assert [f.name for f in signal_config_of(config, "reward", True).functions] == ["default_task"]
    assert [f.name for f in signal_config_of(config, "cost", True).functions] == [
        "default_task_cost"
    ]
    with pytest.raises(HfsdkError, match="neither functions nor a model"):
        signal_config_of(config, "reward", False)


def test_a_backend_without_a_worker_class_is_refused_before_ray_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import types

    import hfsdk.core.plugin_manager as plugin_manager

    config = load_run_config("grpo", None, ["actor.backend=megatron"])
    real = plugin_manager.get_registry

    def backends_without_workers(kind: str) -> object:
        # A backend registered with something that is not a Worker class (config only).
        if kind == "training_backends":
            return {
                name: types.SimpleNamespace(impl=object(), plugin="p", name=name)
                for name in real(kind)
            }
        return real(kind)

    monkeypatch.setattr(plugin_manager, "get_registry", backends_without_workers)
    session = TrainingSession(config, real("algorithms")["grpo"].impl)
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


def test_executor_is_local_exactly_for_one_device_with_fused_roles(monkeypatch) -> None:
    from hfsdk.core.trainer.session import local_executor_problem, use_local_executor

    monkeypatch.delenv("RAY_ADDRESS", raising=False)

    def resolve(*overrides: str) -> bool:
        config = load_run_config("grpo", None, list(overrides))
        pools = {name: {} for name in config.placement.pools}
        return use_local_executor(config, config.placement, pools)

    assert resolve() is True  # the default: one pool of one device
    assert resolve("trainer.executor=ray") is False
    assert resolve("placement.pools.global.devices=2") is False
    assert resolve("placement.colocation=separate") is False
    assert resolve("trainer.ray_address=auto") is False
    with pytest.raises(HfsdkError, match=r"trainer\.executor=local: the pool has 2 devices"):
        resolve("trainer.executor=local", "placement.pools.global.devices=2")
    config = load_run_config("grpo", None, [])
    two = {"a": {}, "b": {}}
    assert "the roles use 2 pools" in local_executor_problem(config, config.placement, two)


def test_assets_come_from_the_policy_role_whatever_its_name(tmp_path) -> None:
    """The tokenizer and model are the ``policy`` role's, found by kind, never by ``"actor"``."""
    import types

    from hfsdk.core.trainer.run_assets import resolve_assets

    data = types.SimpleNamespace(train_files=[str(tmp_path / "t.jsonl")], val_files=[])
    config = types.SimpleNamespace(
        data=data,
        student=types.SimpleNamespace(model_path=str(tmp_path / "student")),
        actor=types.SimpleNamespace(model_path=str(tmp_path / "not-the-policy")),
    )
    assets = resolve_assets(config, "student")  # type: ignore[arg-type]
    assert assets.model_path == assets.tokenizer_path == str(tmp_path / "student")
    assert not assets.default_task
