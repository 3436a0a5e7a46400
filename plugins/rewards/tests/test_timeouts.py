"""A reward function that hangs is stopped at its deadline and named with its sample."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from hfsdk.core.config.signal_config import SignalConfig
from hfsdk_rewards import compute_rewards
from hfsdk_rewards.calling import RewardCall, call_reward_functions
from hfsdk_rewards.errors import RewardFunctionError

PROMPTS = ["p0", "p1", "p2"]
RESPONSES = ["fine", "hangs here", "fine too"]


def _per_sample_hang(prompts: list[str], responses: list[str]) -> list[float]:
    def score(response: str) -> float:
        if response == "hangs here":
            time.sleep(30)
        return 1.0

    return [score(r) for r in responses]


async def _async_hang(prompts: list[str], responses: list[str]) -> list[float]:
    for response in responses:
        if response == "hangs here":
            await asyncio.sleep(30)
    return [1.0] * len(responses)


async def _async_blocks_loop(prompts: list[str], responses: list[str]) -> list[float]:
    time.sleep(30)  # a sync call inside an async function: the loop itself is stuck
    return [1.0] * len(responses)


def _quick(prompts: list[str], responses: list[str]) -> list[float]:
    return [0.5] * len(responses)


def _call(fn: object, label: str) -> RewardCall:
    return RewardCall(label=label, fn=fn)  # type: ignore[arg-type]


def test_a_hung_sync_function_is_named_with_the_sample_it_was_scoring() -> None:
    start = time.monotonic()
    with pytest.raises(RewardFunctionError) as info:
        call_reward_functions(
            [_call(_quick, "quick"), _call(_per_sample_hang, "slow_fn")],
            PROMPTS,
            RESPONSES,
            {},
            timeout_s=0.5,
        )
    assert time.monotonic() - start < 20
    message = str(info.value)
    assert "reward function 'slow_fn' did not return within 0.5 s (reward.timeout_s)" in message
    assert "on sample 1 (response 'hangs here'), at test_timeouts.py:" in message
    assert "in score" in message
    assert "\n" not in message


def test_a_hung_async_function_is_cancelled_and_named() -> None:
    with pytest.raises(RewardFunctionError) as info:
        call_reward_functions(
            [_call(_async_hang, "async_fn")], PROMPTS, RESPONSES, {}, timeout_s=0.5,
            timeout_key="cost.timeout_s",
        )  # fmt: skip
    message = str(info.value)
    assert "'async_fn' did not return within 0.5 s (cost.timeout_s)" in message
    assert "sample 1" in message


def test_an_async_function_that_blocks_its_loop_is_interrupted() -> None:
    start = time.monotonic()
    with pytest.raises(RewardFunctionError, match=r"'blocker' did not return within 0\.5 s"):
        call_reward_functions(
            [_call(_async_blocks_loop, "blocker")], PROMPTS, RESPONSES, {}, timeout_s=0.5
        )
    assert time.monotonic() - start < 20


def test_a_hang_outside_the_main_thread_is_interrupted_too() -> None:
    caught: list[BaseException] = []

    def body() -> None:
        def spin(prompts: list[str], responses: list[str]) -> list[float]:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:  # pure Python: the async exception lands
                pass
            return [0.0] * len(responses)

        try:
            call_reward_functions([_call(spin, "spin")], PROMPTS, RESPONSES, {}, timeout_s=0.5)
        except RewardFunctionError as exc:
            caught.append(exc)

    thread = threading.Thread(target=body)
    thread.start()
    thread.join(timeout=20)
    assert not thread.is_alive() and caught
    assert "on a batch of 3 samples" in str(caught[0])


def test_the_section_timeout_is_used_and_zero_means_no_limit(tmp_path) -> None:
    module = tmp_path / "slowish.py"
    module.write_text(
        "import time\n"
        "def f(prompts, responses):\n"
        "    time.sleep(0.3)\n"
        "    return [1.0] * len(responses)\n"
    )
    fn = {"name": f"{module}:f"}
    with pytest.raises(RewardFunctionError, match=r"within 0.1 s \(cost.timeout_s\)"):
        compute_rewards(PROMPTS, RESPONSES, None, SignalConfig(functions=(fn,), timeout_s=0.1),
                        section="cost")  # fmt: skip
    scores, _ = compute_rewards(PROMPTS, RESPONSES, None, SignalConfig(functions=(fn,),
                                                                       timeout_s=0))  # fmt: skip
    assert scores == [1.0, 1.0, 1.0]
    with pytest.raises(ValueError):
        SignalConfig(timeout_s=-1.0)


async def _async_spins(prompts: list[str], responses: list[str]) -> list[float]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # blocks its loop; never awaits
        pass
    return [1.0] * len(responses)


def test_an_async_function_blocking_its_loop_inside_a_running_loop_off_the_main_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A Ray async actor: scoring runs inside an event loop on a thread other than the main one.
    from hfsdk_rewards import calling

    monkeypatch.setattr(calling, "ASYNC_SLACK_S", 0.5)
    caught: list[BaseException] = []

    async def in_loop() -> None:
        try:
            call_reward_functions(
                [_call(_async_spins, "spinner")], PROMPTS, RESPONSES, {}, timeout_s=0.5
            )
        except RewardFunctionError as exc:
            caught.append(exc)

    thread = threading.Thread(target=lambda: asyncio.run(in_loop()), daemon=True)
    thread.start()
    thread.join(timeout=20)
    assert not thread.is_alive() and caught
    message = str(caught[0])
    assert "'spinner' did not return within 0.5 s" in message
    assert "in _async_spins" in message and "threading.py" not in message
    assert "abandoned" in message
