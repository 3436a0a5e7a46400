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


def test_integer_rewards_are_scored_as_floats() -> None:
    # Before: rewards=[1, 0] built an int64 tensor and step() failed in scores.mean().
    metrics = FakeRun.for_algorithm("grpo", rewards=[1, 0]).step()
    assert metrics["reward/mean"] == 0.5


def test_the_default_prompt_source_draws_fresh_uids() -> None:
    # DAPO's dynamic sampling groups rows by uid: a later round must not reuse the step's
    # (fake_prompts' 0..prompts-1) nor an earlier round's.
    source = FakeRun.for_algorithm("grpo", prompts=2).algorithm.context.prompts
    first, second = source.next_batch(2), source.next_batch(3)
    uids = [*first["uid"], *second["uid"]]
    assert len(set(uids)) == 5 and not set(uids) & {0, 1}
    assert first["input_ids"].shape == (2, 3) and len(source.next_batch()) == 2


def test_dapo_steps_through_uniform_groups_on_fresh_prompts() -> None:
    # Before: a uniform group made dynamic sampling draw more prompts, and FakeRun had no
    # prompt source: "draws prompts, but its AlgorithmContext has no prompt source".
    run = FakeRun.for_algorithm("dapo", rewards=[1.0])
    metrics = run.step()
    rounds = run.algorithm.algo_config.max_generation_rounds
    # FakeSignal restarts its cycle on every call: every round is uniform here.
    assert metrics["dynamic_sampling/generation_rounds"] == rounds
    assert metrics["dynamic_sampling/prompts_drawn"] == 2 * rounds
    assert metrics["dynamic_sampling/groups_kept"] == 0.0
    assert metrics["actor/pg_loss"] == 0.0  # the last round, trained with zero advantages


def test_dapo_refills_a_uniform_group_from_the_next_draw() -> None:
    from hfsdk_testing import FakeSignal

    class Rounds(FakeSignal):  # round one: all 1.0 (both groups dropped); then 1, 0, ...
        def __call__(self, batch):  # type: ignore[no-untyped-def]
            scores, metrics = super().__call__(batch)
            self.sampled = [1.0, 0.0]
            return scores, metrics

    run = FakeRun.for_algorithm(
        "dapo", signals={"reward": lambda log: Rounds("reward", log, [1.0])}
    )
    metrics = run.step()
    assert metrics["dynamic_sampling/generation_rounds"] == 2.0
    assert metrics["dynamic_sampling/groups_kept"] == 2.0
    trained = run.role("actor").batches["update_actor"]
    assert not set(trained["uid"]) & {0, 1}  # the second draw's prompts, not the step's
