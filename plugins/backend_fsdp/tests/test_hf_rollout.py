"""HF-generate rollouts on the actor engine's own module."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from hfsdk.core.batch import Batch
from hfsdk.core.errors import HfsdkError
from hfsdk_backend_common.rollout.hf_rollout import HFRollout
from hfsdk_backend_common.rollout_config import HFRolloutConfig
from hfsdk_backend_fsdp.actor import ActorEngine
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig

PROMPTS = ["3 + 5 =", "1 + 2 + 3 =", "0 + 0 ="]


@pytest.fixture(scope="module")
def actor(model_dir: Path) -> ActorEngine:
    """An actor engine on the tiny model (never updated in this module)."""
    return ActorEngine(FSDPRoleConfig(model_path=str(model_dir)), role="actor")


def test_output_follows_the_batch_contract(
    actor: ActorEngine, make_prompts: Callable[..., Batch]
) -> None:
    prompts = make_prompts(PROMPTS, answers=["8", "6", "0"])
    assert prompts["attention_mask"][0, 0] == 0  # "3 + 5 =" is left-padded
    rollout = HFRollout(HFRolloutConfig(max_response_length=6, n=2), actor)
    out = rollout.generate_sequences(prompts)
    width = prompts["input_ids"].shape[1]
    assert len(out) == 6
    assert out["prompts"].shape == (6, width)
    assert out["responses"].shape == (6, 6)
    assert out["input_ids"].shape == out["attention_mask"].shape == out["position_ids"].shape
    assert out["response_mask"].dtype == torch.float32
    torch.testing.assert_close(out["input_ids"], torch.cat([out["prompts"], out["responses"]], 1))
    torch.testing.assert_close(out["prompts"], prompts["input_ids"].repeat_interleave(2, 0))
    assert list(out["uid"]) == ["p0", "p0", "p1", "p1", "p2", "p2"]
    assert list(out["answer"]) == ["8", "8", "6", "6", "0", "0"]
    assert list(out["raw_prompt"]) == [p for p in PROMPTS for _ in range(2)]
    assert out.meta["temperature"] == 1.0 and out.meta["greedy"] is False
    # Attention covers the real prompt tokens and the valid response tokens.
    torch.testing.assert_close(out["attention_mask"][:, width:].float(), out["response_mask"])
    # Positions count attended tokens only.
    first_valid = out["position_ids"][0, (out["attention_mask"][0] == 1).nonzero()[0]]
    assert first_valid.item() == 0


def test_tokens_after_eos_are_padding_and_text_is_decoded(
    actor: ActorEngine, make_prompts: Callable[..., Batch]
) -> None:
    rollout = HFRollout(HFRolloutConfig(max_response_length=6, n=8), actor)
    out = rollout.generate_sequences(make_prompts(PROMPTS))
    tokenizer = actor.tokenizer
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    ended = 0
    for row, mask, text in zip(
        out["responses"], out["response_mask"], out["response_text"], strict=True
    ):
        length = int(mask.sum())
        assert mask[:length].eq(1).all() and mask[length:].eq(0).all()
        assert row[length:].eq(pad).all()
        eos_positions = (row == eos).nonzero().flatten().tolist()
        if eos_positions:
            ended += 1
            assert eos_positions == [length - 1]
        else:
            assert length == 6  # ran to the length limit
        assert text == tokenizer.decode(row[:length], skip_special_tokens=True)
    assert ended >= 20  # the warm-started model answers and stops


def test_length_limit_without_eos(actor: ActorEngine, make_prompts: Callable[..., Batch]) -> None:
    out = HFRollout(HFRolloutConfig(max_response_length=1, n=4), actor).generate_sequences(
        make_prompts(PROMPTS)
    )
    # One token is never EOS for this model (it always answers first), so every mask is [1].
    assert out["responses"].shape == (12, 1)
    assert out["response_mask"].eq(1).all()


def test_greedy_is_deterministic_padding_invariant_and_equals_top_k_1(
    actor: ActorEngine, make_prompts: Callable[..., Batch]
) -> None:
    config = HFRolloutConfig(max_response_length=5, n=3)
    rollout = HFRollout(config, actor)
    batch = make_prompts(PROMPTS)
    greedy = rollout.generate_sequences(batch, greedy=True)
    assert greedy.meta["greedy"] is True and greedy.meta["temperature"] == 1.0
    # All n copies agree, and so does a second call.
    responses = greedy["responses"].view(3, 3, -1)
    assert (responses == responses[:, :1]).all()
    torch.testing.assert_close(
        rollout.generate_sequences(batch, greedy=True)["responses"], greedy["responses"]
    )
    # Each prompt alone (no padding) gives the same tokens.
    for i, text in enumerate(PROMPTS):
        alone = rollout.generate_sequences(make_prompts([text]), n=1, greedy=True)
        torch.testing.assert_close(alone["responses"][0], greedy["responses"][3 * i])
    # Sampling from only the top token is greedy decoding.
    top1 = HFRollout(HFRolloutConfig(max_response_length=5, n=3, top_k=1), actor)
    torch.testing.assert_close(top1.generate_sequences(batch)["responses"], greedy["responses"])
    # temperature 0 in the config means greedy too; meta can ask for it as well.
    zero = HFRollout(HFRolloutConfig(max_response_length=5, n=3, temperature=0.0), actor)
    torch.testing.assert_close(zero.generate_sequences(batch)["responses"], greedy["responses"])
    batch.meta["greedy"] = True
    torch.testing.assert_close(rollout.generate_sequences(batch)["responses"], greedy["responses"])


def test_sampling_varies_and_n_comes_from_meta(
    actor: ActorEngine, make_prompts: Callable[..., Batch]
) -> None:
    rollout = HFRollout(HFRolloutConfig(max_response_length=4, temperature=1.5), actor)
    batch = make_prompts(["3 + 5 ="])
    batch.meta["n"] = 16
    out = rollout.generate_sequences(batch)
    assert len(out) == 16
    assert len(set(out["response_text"])) > 3
    assert out.meta["temperature"] == 1.5
    assert isinstance(out["response_text"], np.ndarray)


def test_micro_batches_give_the_same_greedy_result(
    actor: ActorEngine, make_prompts: Callable[..., Batch]
) -> None:
    batch = make_prompts(PROMPTS)
    whole = HFRollout(HFRolloutConfig(max_response_length=4), actor)
    pieces = HFRollout(HFRolloutConfig(max_response_length=4, micro_batch_size=1), actor)
    torch.testing.assert_close(
        whole.generate_sequences(batch, greedy=True)["responses"],
        pieces.generate_sequences(batch, greedy=True)["responses"],
    )


def test_bad_inputs_are_clear_errors(
    actor: ActorEngine, make_prompts: Callable[..., Batch]
) -> None:
    rollout = HFRollout(HFRolloutConfig(max_prompt_length=3), actor)
    with pytest.raises(HfsdkError, match="max_prompt_length"):
        rollout.generate_sequences(make_prompts(PROMPTS))
    with pytest.raises(HfsdkError, match="needs batch keys"):
        rollout.generate_sequences(Batch.from_dict(non_tensors={"raw_prompt": ["x"]}))


def test_hfsdk_decoder_gives_transformers_greedy_tokens(
    actor: ActorEngine, make_prompts: Callable[..., Batch]
) -> None:
    batch = make_prompts([*PROMPTS, "7 + 1 + 1 + 1 ="])  # left padding of different widths
    ours = HFRollout(HFRolloutConfig(max_response_length=8, decoder="hfsdk"), actor)
    theirs = HFRollout(HFRolloutConfig(max_response_length=8, decoder="transformers"), actor)
    assert ours.uses_hfsdk_decoder and not theirs.uses_hfsdk_decoder
    mine = ours.generate_sequences(batch, greedy=True)
    reference = theirs.generate_sequences(batch, greedy=True)
    torch.testing.assert_close(mine["responses"], reference["responses"])
    torch.testing.assert_close(mine["response_mask"], reference["response_mask"])
    # Sampling with the same seed draws the same tokens twice (the decoder's own sampler).
    sampled = []
    for _ in range(2):
        torch.manual_seed(5)
        sampled.append(ours.generate_sequences(batch, n=4)["responses"])
    torch.testing.assert_close(sampled[0], sampled[1])
    assert not torch.equal(sampled[0][0::4], sampled[0][1::4])


def test_decoder_choice_follows_the_model() -> None:
    llama = {"model_type": "llama", "num_attention_heads": 4, "num_key_value_heads": 2,
             "intermediate_size": 64, "hidden_act": "silu"}  # fmt: skip
    assert HFRollout._resolve_decoder("auto", llama)
    assert not HFRollout._resolve_decoder("transformers", llama)
    biased = {**llama, "attention_bias": True}
    assert not HFRollout._resolve_decoder("auto", biased)  # falls back to generate
    with pytest.raises(
        HfsdkError, match=r"rollout\.decoder=hfsdk .* rollout\.decoder: transformers"
    ):
        HFRollout._resolve_decoder("hfsdk", {**llama, "model_type": "gpt2"})


@pytest.mark.parametrize("decoder", ["hfsdk", "transformers"])
def test_temperature_zero_is_greedy_even_when_asked_to_sample(
    actor: ActorEngine, make_prompts: Callable[..., Batch], decoder: str
) -> None:
    """Validation (val_n > 1) and Algorithm.generate ask for sampling explicitly: at
    temperature 0 the hfsdk decoder divided the logits by 0 and repeated one token, where
    vLLM decodes greedily."""
    batch = make_prompts(PROMPTS)
    config = HFRolloutConfig(max_response_length=8, temperature=0.0, decoder=decoder)
    rollout = HFRollout(config, actor)
    asked_to_sample = rollout.generate_sequences(batch, n=2, greedy=False)
    greedy = rollout.generate_sequences(batch, n=2, greedy=True)
    torch.testing.assert_close(asked_to_sample["responses"], greedy["responses"])
    assert asked_to_sample.meta["greedy"] is True and asked_to_sample.meta["temperature"] == 1.0
