"""The fakes of ``hfsdk_testing`` behave like real worker groups where it matters."""

from __future__ import annotations

import pytest

from hfsdk import KIND_OPERATIONS
from hfsdk_testing import FakeRole, FakeRun


def test_a_role_offers_only_its_kinds_operations() -> None:
    critic = FakeRole("critic", [], seed=0, kind="value")
    assert critic.compute_values is not None
    with pytest.raises(
        AttributeError, match=r"role 'critic' is of kind 'value'.*generate_sequences"
    ):
        critic.generate_sequences  # noqa: B018


def test_a_program_calling_a_wrong_kinds_operation_fails_under_fake_run() -> None:
    run = FakeRun.for_algorithm("ppo")
    original = run.algorithm.generate

    def generate_on_the_critic(prompts):  # what a buggy program would do
        return run.algorithm.role("critic").generate_sequences(prompts)

    run.algorithm.generate = generate_on_the_critic
    with pytest.raises(AttributeError, match="kind 'value'"):
        run.step()
    run.algorithm.generate = original
    assert run.step()  # the real program calls only what each role offers


def test_every_kind_has_operations() -> None:
    from hfsdk import ROLE_KINDS

    assert set(KIND_OPERATIONS) == set(ROLE_KINDS)
