"""The planner's FLOP count agrees with torch's own count of the matmuls a tiny model runs.

``torch.utils.flop_counter.FlopCounterMode`` counts every matmul a pass dispatches; the
planner leaves out attention's score and value products (``4 x layers x batch x T^2 x
hidden`` per forward pass with eager attention), so they are taken off torch's count.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from hfsdk_planner.flops import forward_flops, training_flops  # noqa: E402
from hfsdk_planner.model_spec import ModelSpec  # noqa: E402

BATCH, WIDTH, RESPONSE = 4, 24, 8
LAYERS, HIDDEN = 4, 64
KEEP = RESPONSE + 1  # the backend's logits_to_keep: the response columns and one more


def _config(tied: bool = False) -> object:
    return transformers.LlamaConfig(
        hidden_size=HIDDEN,
        intermediate_size=160,
        num_hidden_layers=LAYERS,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=500,
        tie_word_embeddings=tied,
        attn_implementation="eager",
    )


def _matmul_flops(run: object, passes: int) -> float:
    """torch's FLOPs of ``run()`` without attention's products (``passes`` forwards' worth)."""
    with FlopCounterMode(display=False) as counter:
        run()
    attention = 4 * LAYERS * BATCH * WIDTH**2 * HIDDEN * passes
    return counter.get_total_flops() - attention


def _ids() -> object:
    torch.manual_seed(0)
    return torch.randint(0, 500, (BATCH, WIDTH))


def _spec(model: object) -> ModelSpec:
    spec = ModelSpec.from_hf_config(model.config.to_dict())
    assert spec.num_params == sum(p.numel() for p in model.parameters())
    return spec


@pytest.mark.parametrize("tied", [False, True])
def test_a_log_prob_pass_counts_the_lm_head_at_the_kept_positions_only(tied: bool) -> None:
    model = transformers.LlamaForCausalLM(_config(tied))
    ids = _ids()
    with torch.no_grad():
        measured = _matmul_flops(lambda: model(input_ids=ids, logits_to_keep=KEEP), passes=1)
    ours = forward_flops(_spec(model), BATCH * WIDTH, head_tokens=BATCH * KEEP)
    assert ours == pytest.approx(measured, rel=1e-6)


@pytest.mark.parametrize("recompute", [False, True])
def test_a_training_pass_counts_forward_backward_and_the_recomputation(recompute: bool) -> None:
    model = transformers.LlamaForCausalLM(_config())
    if recompute:
        model.gradient_checkpointing_enable()
    model.train()
    ids = _ids()

    def step() -> None:
        logits = model(input_ids=ids, logits_to_keep=KEEP).logits
        logits.float().logsumexp(-1).sum().backward()

    # Attention runs forward, backward (twice a forward) and, recomputing, forward again.
    measured = _matmul_flops(step, passes=4 if recompute else 3)
    ours = training_flops(_spec(model), BATCH * WIDTH, recompute, head_tokens=BATCH * KEEP)
    assert ours == pytest.approx(measured, rel=1e-6)


def test_a_critic_has_a_one_wide_value_head_at_every_position() -> None:
    config = _config()
    config.num_labels = 1
    model = transformers.AutoModelForTokenClassification.from_config(config)
    ids = _ids()

    def step() -> None:
        model(input_ids=ids).logits.sum().backward()

    measured = _matmul_flops(step, passes=3)
    # The critic's spec is its causal LM's (what model_path holds): no LM head counted.
    spec = ModelSpec.from_hf_config(config.to_dict())
    ours = training_flops(spec, BATCH * WIDTH, head_width=1)
    assert ours == pytest.approx(measured, rel=1e-6)


def test_a_lora_update_counts_the_frozen_base_s_input_gradients_and_the_adapters() -> None:
    peft = pytest.importorskip("peft")
    model = transformers.LlamaForCausalLM(_config())
    spec = _spec(model)
    targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    lora = peft.get_peft_model(model, peft.LoraConfig(r=8, target_modules=targets))
    ids = _ids()

    def step() -> None:
        logits = lora(input_ids=ids, logits_to_keep=KEEP).logits
        logits.float().logsumexp(-1).sum().backward()

    measured = _matmul_flops(step, passes=3)
    ours = training_flops(spec, BATCH * WIDTH, head_tokens=BATCH * KEEP, lora_rank=8)
    # The first layer's q/k/v skip their input gradients (the embeddings are frozen): the
    # count is that much high, a few percent on four layers, less on real depths.
    assert ours == pytest.approx(measured, rel=0.03)
    full = training_flops(spec, BATCH * WIDTH, head_tokens=BATCH * KEEP)
    assert ours < 0.9 * full  # the base costs 4 N per token, not full fine-tuning's 6 N
