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


def test_a_signal_override_naming_no_scorer_role_is_refused() -> None:
    from hfsdk import HfsdkError
    from hfsdk_testing import FakeSignal

    # Before: the misspelt key was ignored and the default FakeSignal scored instead.
    def factory(log):  # type: ignore[no-untyped-def]
        return FakeSignal("rewrd", log, [5.0])

    with pytest.raises(HfsdkError, match=r"'rewrd'.*grpo.*scorer roles: reward") as info:
        FakeRun.for_algorithm("grpo", signals={"rewrd": factory})
    assert "\n" not in str(info.value)
    run = FakeRun.for_algorithm("grpo", signals={"reward": factory})
    assert run.step()["reward/mean"] == 5.0  # the right name still takes


def test_an_empty_rewards_list_is_refused() -> None:
    from hfsdk import HfsdkError
    from hfsdk_testing import FakeSignal

    # Before: ZeroDivisionError (integer modulo by zero) inside the first step.
    with pytest.raises(HfsdkError, match=r"rewards=\[\].*at least one"):
        FakeRun.for_algorithm("grpo", rewards=[])
    with pytest.raises(HfsdkError, match=r"FakeSignal 'reward' got sampled=\[\].*at least one"):
        FakeSignal("reward", [], [])  # built directly, as a program's own test does


@pytest.mark.parametrize("algo", ["sft", "dpo", "reward_model"])
def test_an_algorithm_that_tokenizes_on_the_controller_is_refused_up_front(algo: str) -> None:
    from hfsdk import HfsdkError

    # Before: it built, then step() said "pass tokenizer=... when building the context",
    # which for_algorithm has no parameter for.
    with pytest.raises(HfsdkError, match=rf"^FakeRun\.for_algorithm\('{algo}'\)") as info:
        FakeRun.for_algorithm(algo)
    message = str(info.value)
    assert "\n" not in message and "AlgorithmContext" in message and "Trainer" in message
