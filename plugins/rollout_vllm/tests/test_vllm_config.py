"""Which vLLM ``logprobs_mode`` gives the actor's log-probs, per sampling setting."""

from __future__ import annotations

import pytest

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
