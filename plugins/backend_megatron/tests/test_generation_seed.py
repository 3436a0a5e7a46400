"""The policy worker's generations: training's draw on from its stream, a seeded call
(validation's) leaves it as it was."""

from __future__ import annotations

import pytest

from hfsdk_backend_megatron import megatron_worker
from hfsdk_backend_megatron.megatron_worker import MegatronPolicyWorker
from hfsdk_testing.rng import check_generation_seeding


def test_only_a_seeded_generation_forks_the_workers_generators(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    check_generation_seeding(monkeypatch, megatron_worker, MegatronPolicyWorker)
