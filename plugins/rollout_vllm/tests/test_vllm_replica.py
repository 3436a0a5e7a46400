"""A vLLM engine as a rollout replica on a pool of its own (placement.pools.rollout)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfsdk.core.config import load_run_config
from hfsdk.core.trainer.trainer import Trainer

OVERRIDES = [
    "rollout.backend=vllm",
    "placement.pools.global.devices=1",
    "placement.pools.rollout.devices=1",
    "trainer.executor=ray",
    "trainer.loggers=[jsonl]",
    "data.batch_size=4",
    "algorithm.n_samples_per_prompt=2",
    "actor.mini_batch_size=4",
    "actor.micro_batch_size=8",
]


# Heavy: a Ray run with a vLLM replica and its broadcast, checked only here. The quick
# suite reloads vLLM in process (test_vllm_training.py: the run reads the engine back and
# verifies every sync).
@pytest.mark.heavy
@pytest.mark.slow
@pytest.mark.distributed
@pytest.mark.parametrize("pipeline", ["sync", "one_step_off"])
def test_a_vllm_replica_samples_with_the_weights_the_pipeline_promises(
    tmp_path: Path, pipeline: str
) -> None:
    """vLLM's log-probs of what it sampled against the actor's, before its update: equal
    under ``sync`` (the engine reloaded every broadcast weight), a step behind under
    ``one_step_off`` (it sampled with the weights before the last update)."""
    config = load_run_config(
        "grpo", None, [*OVERRIDES, "trainer.total_steps=3", f"trainer.pipeline={pipeline}"]
    )
    rows = Trainer(config, tmp_path / "run", quiet=True).fit()
    gaps = [r["rollout/log_prob_diff_max"] for r in rows]
    synced = [r["sync/bytes"] for r in rows if "sync/bytes" in r]
    assert synced and all(b > 0 for b in synced)
    if pipeline == "sync":
        assert all(gap < 1e-4 for gap in gaps), gaps
    else:
        assert gaps[0] < 1e-4 and all(gap > 1e-3 for gap in gaps[1:]), gaps


@pytest.mark.slow
@pytest.mark.distributed
@pytest.mark.heavy  # about a minute or more each on a shared 2-core machine (Ray, a restart)
@pytest.mark.parametrize(
    ("fault", "says"),
    [
        ("sync_drop:2", "1 tensor(s) sent but never loaded"),
        ("sync_stale:2", "tensor(s) differ from what was sent"),
        ("sync_skip:2", "generated with weights version 1 where version 2 was synced"),
    ],
)
def test_a_faulty_sync_to_a_vllm_replica_is_caught_within_one_step(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    fault: str,
    says: str,
) -> None:
    """The sync after step 2's update goes wrong on the way to a vLLM replica: a tensor
    dropped by the sender, written into copies, never submitted. Each is caught before
    step 3 trains: one warning line, the replica restarted and synced afresh (its engine
    reloaded and read back), and step 3 sampled with exactly the actor's weights (vLLM's
    log-probs equal the actor's). The engine's own faults (``vllm_*``) are not injected
    here: they count reloads, and the actor's worker reloads its own vLLM engine (for
    validation) at the same counts, so they would fire there too; they are tested on a
    colocated engine (test_vllm_rollout.py, test_vllm_training.py) and a replica's
    engine read-back failing its sync in plugins/backend_common/tests/rollout/test_replica_sync.py."""
    import logging

    from hfsdk_faults import faults

    monkeypatch.setenv(faults.FAULT_ENV, fault)
    monkeypatch.setattr(faults, "_FIRED", set())
    config = load_run_config("grpo", None, [*OVERRIDES, "trainer.total_steps=3"])
    with caplog.at_level(logging.WARNING, logger="hfsdk.core.trainer.trainer"):
        rows = Trainer(config, tmp_path / "run", quiet=True).fit()
    warnings = [
        r.getMessage() for r in caplog.records if "rollout replica failure" in r.getMessage()
    ]
    assert len(warnings) == 1 and says in warnings[0] and "\n" not in warnings[0], warnings
    assert [r["async/rollout_restarts"] for r in rows] == [0.0, 0.0, 1.0]
    assert rows[2]["rollout/log_prob_diff_max"] < 1e-4
    for row in rows:
        if "sync/count" in row:
            assert row["sync/verified"] == row["sync/count"] >= 1.0, row["step"]
