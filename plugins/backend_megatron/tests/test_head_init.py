"""A value/score head loaded from a directory whose head has another bias, as fsdp loads it.

A critic started from a reward model (``score.weight``, no bias) starts its value
bias at 0; a scorer loaded from a critic's directory ignores ``score.bias``. Both
give the fsdp backend's values/scores on the same directory.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from hfsdk import Batch, position_ids_from_mask

PROMPT, RESPONSE, ROWS = 6, 5, 4

pytestmark = [
    # Builds a megatron engine in the test process (see test_score_model.py).
    pytest.mark.heavy,
    pytest.mark.usefixtures("own_megatron_state"),
]


@pytest.fixture(scope="module")
def tokenizer_dir() -> Path:
    from hfsdk import default_task_assets

    return default_task_assets().tokenizer_dir


def _batch() -> Batch:
    generator = torch.Generator().manual_seed(3)
    ids = torch.randint(3, 20, (ROWS, PROMPT + RESPONSE), generator=generator)
    mask = torch.ones_like(ids)
    for row in range(ROWS):
        mask[row, : row % 3] = 0  # left-padded prompts
        ids[row, : row % 3] = 0
    tensors = {
        "input_ids": ids,
        "attention_mask": mask,
        "position_ids": position_ids_from_mask(mask),
        "responses": ids[:, PROMPT:],
        "response_mask": torch.ones(ROWS, RESPONSE, dtype=torch.long),
    }
    return Batch.from_dict(tensors=tensors)


def _megatron(path: Path, role: str, kind: str) -> Any:
    from hfsdk_backend_megatron.engine import MegatronEngine
    from hfsdk_backend_megatron.megatron_config import MegatronRoleConfig

    return MegatronEngine(MegatronRoleConfig(model_path=str(path)), role=role, kind=kind)


def test_critic_from_a_reward_model_starts_its_bias_at_zero(
    tmp_path: Path,
    tokenizer_dir: Path,
    save_tiny_llama: Callable[..., Path],
    caplog: pytest.LogCaptureFixture,
) -> None:
    from hfsdk_backend_fsdp.critic import CriticEngine
    from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig

    # LlamaForSequenceClassification: score.weight, no bias (an hfsdk reward_model export).
    path = save_tiny_llama(tmp_path / "rm", tokenizer_dir, head="score", seed=4)
    with caplog.at_level("INFO", logger="hfsdk_backend_megatron.engine"):
        megatron = _megatron(path, "critic", "critic")
    assert "value head from" in caplog.text and "starts untrained (score.bias)" in caplog.text
    fsdp = CriticEngine(FSDPRoleConfig(model_path=str(path)), role="critic")
    batch = _batch()
    got = megatron.compute_values(batch)["values"]
    expected = fsdp.compute_values(batch)["values"]
    assert got.abs().max() > 0.1  # the loaded score.weight, not a fresh head
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)


def test_scorer_from_a_critic_ignores_its_bias(
    tmp_path: Path, tokenizer_dir: Path, save_tiny_llama: Callable[..., Path]
) -> None:
    from transformers import AutoModelForTokenClassification

    from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig
    from hfsdk_backend_fsdp.scorer import ScoreEngine

    # LlamaForTokenClassification: score.weight and score.bias, made non-zero here.
    path = save_tiny_llama(tmp_path / "critic", tokenizer_dir, head="value", seed=6)
    critic = AutoModelForTokenClassification.from_pretrained(str(path))
    with torch.no_grad():
        critic.score.bias.fill_(0.5)
    critic.save_pretrained(str(path))
    megatron = _megatron(path, "reward", "score")
    fsdp = ScoreEngine(FSDPRoleConfig(model_path=str(path)), role="reward")
    batch = _batch()
    got = megatron.compute_scores(batch)["rm_scores"]
    torch.testing.assert_close(got, fsdp.compute_scores(batch)["rm_scores"], rtol=0, atol=1e-5)


def test_frozen_scorer_from_a_causal_lm_warns_a_critic_does_not(
    tmp_path: Path,
    tokenizer_dir: Path,
    save_tiny_llama: Callable[..., Path],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A reward model pointed at a causal LM scores with a random head it never trains: a
    WARNING naming the path; a critic (or a reward model being trained) trains its head."""
    path = save_tiny_llama(tmp_path / "lm", tokenizer_dir, head="lm", seed=2)
    logger = "hfsdk_backend_megatron.engine"
    with caplog.at_level("INFO", logger=logger):
        _megatron(path, "reward", "score")
    warnings = [r for r in caplog.records if r.levelname == "WARNING" and r.name == logger]
    assert len(warnings) == 1 and f"reward.model.model_path={path}" in warnings[0].getMessage()
    assert "random" in warnings[0].getMessage()
    for role, kind in (("critic", "critic"), ("reward_model", "score_model")):
        caplog.clear()
        with caplog.at_level("INFO", logger=logger):
            _megatron(path, role, kind)
        assert not [r for r in caplog.records if r.levelname == "WARNING" and r.name == logger]
        assert "starts untrained" in caplog.text
