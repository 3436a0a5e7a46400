"""Loading role models and tokenizers from a local directory."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch
from transformers import PreTrainedTokenizerFast

from hfsdk import load_tokenizer
from hfsdk.core.errors import HfsdkError
from hfsdk_backend_fsdp.critic import CriticEngine
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig
from hfsdk_backend_fsdp.models import check_model_dir, load_model
from hfsdk_backend_fsdp.scorer import ScoreEngine, TrainableScoreEngine


def test_each_kind_loads_with_its_head(model_dir: Path) -> None:
    ids = torch.tensor([[1, 5, 6, 7]])
    lm = load_model(model_dir, "causal_lm", torch.float32)
    assert lm(input_ids=ids).logits.shape[-1] == lm.config.vocab_size
    critic = load_model(model_dir, "token_value", torch.float32)
    assert critic(input_ids=ids).logits.shape == (1, 4, 1)
    assert critic.dropout.p == 0.0  # values must not be noisy in training mode
    torch.testing.assert_close(
        critic.model.layers[0].mlp.up_proj.weight, lm.model.layers[0].mlp.up_proj.weight
    )
    scorer = load_model(model_dir, "sequence_score", torch.bfloat16)
    assert scorer.score.weight.dtype == torch.bfloat16
    assert scorer.config.num_labels == 1


def test_bad_paths_and_kinds_are_clear_errors(tmp_path: Path, model_dir: Path) -> None:
    with pytest.raises(HfsdkError, match="no model_path"):
        check_model_dir(None, "critic")
    with pytest.raises(HfsdkError, match="not a local HF model directory"):
        check_model_dir(tmp_path, "actor")
    assert check_model_dir(model_dir, "actor") == model_dir
    with pytest.raises(HfsdkError, match="unknown"):
        load_model(model_dir, "vision", torch.float32)  # type: ignore[arg-type]


def test_tokenizer_keeps_its_trained_ids(model_dir: Path) -> None:
    tokenizer = load_tokenizer(model_dir)
    assert isinstance(tokenizer, PreTrainedTokenizerFast)
    assert tokenizer.convert_ids_to_tokens(tokenizer("3 + 5 =").input_ids) == [
        "<s>",
        "3",
        "+",
        "5",
        "=",
    ]


def test_a_fresh_head_is_reported_in_one_line(
    model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="hfsdk_backend_fsdp.models"):
        load_model(model_dir, "token_value", torch.float32)
        load_model(model_dir, "causal_lm", torch.float32)
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 1
    assert "token_value head" in messages[0] and "score.weight" in messages[0]


def test_a_gpt2_critic_reads_its_classifier_head(
    tmp_path: Path, model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """GPT-2's token classifier calls its head `classifier`, not `score`: a critic loads it
    (the head reported fresh, not as missing weights); a reward model still needs `score`."""
    from transformers import GPT2Config, GPT2LMHeadModel

    tokenizer = load_tokenizer(model_dir)
    config = GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=32,
        n_embd=16,
        n_layer=1,
        n_head=2,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(0)
    GPT2LMHeadModel(config).save_pretrained(str(tmp_path))
    tokenizer.save_pretrained(str(tmp_path))
    with caplog.at_level(logging.INFO, logger="hfsdk_backend_fsdp.models"):
        critic = load_model(tmp_path, "token_value", torch.float32)
    (record,) = [r for r in caplog.records if r.name == "hfsdk_backend_fsdp.models"]
    assert record.levelno == logging.INFO and "classifier.weight" in record.getMessage()
    ids = torch.tensor([[1, 5, 6, 7]])
    assert critic(input_ids=ids).logits.shape == (1, 4, 1)
    assert load_model(tmp_path, "sequence_score", torch.float32).score.out_features == 1


def test_frozen_scorer_from_a_causal_lm_warns_a_critic_does_not(
    model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A reward model pointed at a causal LM scores with a head it never trains: a WARNING
    naming the path; a critic or a reward model being trained keeps the INFO line."""
    logger = "hfsdk_backend_fsdp.models"
    with caplog.at_level("INFO", logger=logger):
        ScoreEngine(FSDPRoleConfig(model_path=str(model_dir)), role="reward")
    warnings = [r for r in caplog.records if r.levelname == "WARNING" and r.name == logger]
    assert len(warnings) == 1
    assert f"reward.model.model_path={model_dir}" in warnings[0].getMessage()
    for engine, role in ((CriticEngine, "critic"), (TrainableScoreEngine, "reward_model")):
        caplog.clear()
        with caplog.at_level("INFO", logger=logger):
            engine(FSDPRoleConfig(model_path=str(model_dir)), role=role)
        assert not [r for r in caplog.records if r.levelname == "WARNING"]
        assert "starts untrained" in caplog.text
