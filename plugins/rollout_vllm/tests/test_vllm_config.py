"""Which vLLM ``logprobs_mode`` gives the actor's log-probs, per sampling setting."""

from __future__ import annotations

import pytest

from hfsdk import ConfigError, load_run_config
from hfsdk_rollout_vllm.vllm_config import VLLMRolloutConfig


@pytest.mark.parametrize(
    ("temperature", "top_p", "top_k", "mode", "exact"),
    [
        (1.0, 1.0, 0, "raw_logprobs", True),
        (1.0, 0.5, 0, "raw_logprobs", True),  # processed would be renormalised over the nucleus
        (1.0, 1.0, 5, "raw_logprobs", True),
        (0.0, 0.5, 0, "raw_logprobs", True),  # greedy: temperature 1 for the actor too
        (0.7, 1.0, 0, "processed_logprobs", True),  # raw would lack the temperature
        (0.7, 0.9, 0, "processed_logprobs", False),  # no vLLM mode matches: said once
    ],
)
def test_logprobs_mode_matches_the_actors_log_probs(
    temperature: float, top_p: float, top_k: int, mode: str, exact: bool
) -> None:
    config = VLLMRolloutConfig(temperature=temperature, top_p=top_p, top_k=top_k)
    assert config.logprobs_mode() == mode
    caveat = config.logprobs_caveat()
    assert (caveat is None) == exact
    if caveat is not None:
        assert "temperature=0.7" in caveat and "top_p=0.9" in caveat


@pytest.mark.parametrize(
    ("overrides", "refused"),
    [
        (["rollout.temperature=0.7", "rollout.top_p=0.9", "algorithm.is_correction=tis"], True),
        (["rollout.temperature=0.7", "rollout.top_k=5", "rollout_correction.preset=icepop"], True),
        (["rollout.temperature=0.7", "rollout.top_p=0.9", "trainer.max_mismatch_kl=0.1"], True),
        (["rollout.temperature=0.7", "rollout.top_p=0.9"], False),  # no weight: metrics only
        (["rollout.temperature=1.0", "rollout.top_p=0.9", "algorithm.is_correction=tis"], False),
        (["rollout.temperature=0.7", "algorithm.is_correction=tis"], False),
    ],
)
def test_a_correction_whose_behaviour_policy_vllm_cannot_report_is_refused(
    overrides: list[str], refused: bool
) -> None:
    from hfsdk import ConfigError
    from hfsdk.core.config import resolve_run_config
    from hfsdk_rollout_vllm.checks import behaviour_policy_problem

    data: dict = {"rollout": {"backend": "vllm"}}
    for item in overrides:
        key, value = item.split("=", 1)
        section, name = key.split(".", 1)
        data.setdefault(section, {})[name] = __import__("yaml").safe_load(value)
    try:
        config = resolve_run_config("grpo", data)
    except ConfigError as exc:  # the config check runs behaviour_policy_problem first
        said = "full-vocabulary behaviour log-probs" in str(exc)
        assert said == refused, exc  # (not refused: vLLM missing on this machine, say)
        assert "\n" not in str(exc)
        return
    assert not refused
    assert behaviour_policy_problem(config) is None


@pytest.mark.parametrize(("text", "sleep"), [("on", "on"), ("off", "off"), ("auto", "auto")])
def test_sleep_on_and_off_are_words_as_the_docs_write_them(text: str, sleep: str) -> None:
    # YAML reads a bare on/off as a boolean: it was refused as "bad value 'True'".
    from hfsdk import load_run_config

    config = load_run_config("grpo", None, ["rollout.backend=vllm", f"rollout.sleep={text}"])
    assert config.rollout.sleep == sleep


@pytest.mark.parametrize("temperature", [2.5, 100.0])
def test_a_temperature_vllm_refuses_is_refused_with_the_config(temperature: float) -> None:
    # Before: accepted, and vLLM's SamplingParams refused it inside the worker (WorkerError).
    with pytest.raises(ValueError, match=r"is over 2\.0 \(vLLM's limit\)") as info:
        VLLMRolloutConfig(temperature=temperature)
    assert f"{temperature!r}" in str(info.value) and "\n" not in str(info.value)
    assert VLLMRolloutConfig(temperature=2.0).temperature == 2.0
    with pytest.raises(ConfigError, match=r"'rollout.temperature'.* set rollout.temperature at"):
        load_run_config(
            "grpo", None, ["rollout.backend=vllm", f"rollout.temperature={temperature}"]
        )
    load_run_config("grpo", None, [f"rollout.temperature={temperature}"])  # hf samples at any
