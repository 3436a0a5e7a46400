"""Sequence packing (``packing``): the same log-probs, values and gradients as padded passes."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from hfsdk import position_ids_from_mask
from hfsdk.core.batch import Batch
from hfsdk_backend_common.lora_config import LoraConfig
from hfsdk_backend_common.optim_config import OptimConfig
from hfsdk_backend_common.packing import pack_rows
from hfsdk_backend_fsdp.actor import ActorEngine, ReferenceEngine
from hfsdk_backend_fsdp.critic import CriticEngine
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig
from hfsdk_backend_fsdp.micro_batches import token_budget_groups

PROMPT, RESPONSE = 7, 6
PROMPT_PAD = [0, 3, 1, 5, 2, 0]
RESPONSE_LEN = [6, 2, 4, 1, 6, 3]


def _batch(vocab: int) -> Batch:
    """Rows of very different lengths: left-padded prompts, right-padded responses."""
    generator = torch.Generator().manual_seed(5)
    rows = len(PROMPT_PAD)
    ids = torch.randint(3, vocab, (rows, PROMPT + RESPONSE), generator=generator)
    mask = torch.ones_like(ids)
    response_mask = torch.zeros(rows, RESPONSE, dtype=torch.long)
    for row, (pad, length) in enumerate(zip(PROMPT_PAD, RESPONSE_LEN, strict=True)):
        mask[row, :pad] = 0
        ids[row, :pad] = 0
        response_mask[row, :length] = 1
    mask[:, PROMPT:] = response_mask
    ids[:, PROMPT:] = ids[:, PROMPT:] * response_mask
    return Batch.from_dict(
        tensors={
            "input_ids": ids,
            "attention_mask": mask,
            "position_ids": position_ids_from_mask(mask),
            "responses": ids[:, PROMPT:],
            "response_mask": response_mask,
            "advantages": torch.randn(rows, RESPONSE, generator=generator) * response_mask,
        }
    )


def test_pack_rows_restarts_positions_and_keeps_response_predictors() -> None:
    batch = _batch(50)
    packed = pack_rows(batch["input_ids"], batch["attention_mask"], batch["position_ids"], RESPONSE)
    lengths = batch["attention_mask"].sum(-1)
    assert packed.tokens == int(lengths.sum())
    starts = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)[:-1]])
    assert packed.position_ids[0, starts].eq(0).all()  # every row restarts at 0
    assert packed.keep.numel() == int(batch["response_mask"].sum())
    # The token after each kept position is the response token it predicts.
    nxt = packed.input_ids[0, packed.keep + 1]
    assert torch.equal(nxt, packed.response_tokens(batch["responses"]))


def _engine(cls: type, model_dir: Path, packing: bool, **extra: object) -> object:
    config = FSDPRoleConfig(
        model_path=str(model_dir),
        packing=packing,
        mini_batch_size=6,
        micro_batch_size=6,
        optim=OptimConfig(lr=1e-2),
        **extra,  # type: ignore[arg-type]
    )
    return cls(config, role="actor")


@pytest.mark.parametrize("lora", [0, 4], ids=["full", "lora"])
def test_actor_log_probs_entropy_and_gradients_equal_the_padded_pass(
    model_dir: Path, lora: int
) -> None:
    extra = {"lora": LoraConfig(rank=lora)} if lora else {}
    grads, outputs = {}, {}
    for packing in (False, True):
        actor = _engine(ActorEngine, model_dir, packing, **extra)
        batch = _batch(actor.module.config.vocab_size)
        outputs[packing] = actor.compute_log_prob(batch)
        actor.module.train()
        log_probs, entropy = actor._response_outputs(batch, 0.8, "grad")
        mask = batch["response_mask"]
        loss = (log_probs * batch["advantages"]).sum() + 0.1 * (entropy * mask).sum()
        loss.backward()
        grads[packing] = {
            n: p.grad.clone() for n, p in actor.module.named_parameters() if p.grad is not None
        }
    for key in ("old_log_probs", "entropys"):
        # float32; only the matrix shapes (so the summation order) differ.
        torch.testing.assert_close(outputs[True][key], outputs[False][key], atol=2e-5, rtol=1e-5)
    assert outputs[False]["old_log_probs"].abs().sum() > 1.0
    assert grads[True].keys() == grads[False].keys() and grads[False]
    for name, grad in grads[False].items():
        torch.testing.assert_close(grads[True][name], grad, atol=2e-5, rtol=1e-4, msg=name)


def test_reference_and_critic_equal_the_padded_pass(model_dir: Path) -> None:
    batch = None
    refs, values, grads = {}, {}, {}
    for packing in (False, True):
        reference = _engine(ReferenceEngine, model_dir, packing)
        batch = _batch(reference.module.config.vocab_size)
        refs[packing] = reference.compute_ref_log_prob(batch)["ref_log_probs"]
        critic = _engine(CriticEngine, model_dir, packing)
        torch.manual_seed(0)
        values[packing] = critic.compute_values(batch)["values"]
        critic.module.train()
        (critic._values(batch) * batch["advantages"]).sum().backward()
        grads[packing] = {n: p.grad.clone() for n, p in critic.module.named_parameters()}
    torch.testing.assert_close(refs[True], refs[False], atol=2e-5, rtol=1e-5)
    torch.testing.assert_close(values[True], values[False], atol=2e-5, rtol=1e-5)
    assert values[False].abs().sum() > 0
    for name, grad in grads[False].items():
        torch.testing.assert_close(grads[True][name], grad, atol=2e-5, rtol=1e-4, msg=name)


def test_token_budget_passes_pack_instead_of_padding() -> None:
    # Long prompts with short responses and the reverse: padded to a pass's longest prompt
    # plus its longest response, two rows cost 2 x 20 tokens; packed, 11 + 11.
    lengths = [(10, 1), (1, 10), (10, 1), (1, 10)]
    padded = token_budget_groups(lengths, 24)
    packed = token_budget_groups(lengths, 24, packed=True)
    assert len(padded) == 4
    assert packed == [[0, 1], [2, 3]]


@pytest.mark.parametrize("attention", ["eager", "sdpa"])
@pytest.mark.parametrize("use_cache", [None, True, False])
def test_the_packed_mask_does_not_depend_on_use_cache(
    model_dir: Path, attention: str, use_cache: bool | None
) -> None:
    """Without an explicit mask, transformers infers the packed rows' mask only when it makes
    no KV cache; the explicit block-diagonal mask gives the padded pass's logits either way."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), attn_implementation=attention)
    model = model.float().eval()
    batch = _batch(model.config.vocab_size)
    packed = pack_rows(batch["input_ids"], batch["attention_mask"], batch["position_ids"], RESPONSE)
    extra = {} if use_cache is None else {"use_cache": use_cache}
    with torch.no_grad():
        padded = model(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            position_ids=batch["position_ids"],
        ).logits
        got = model(
            input_ids=packed.input_ids,
            position_ids=packed.position_ids,
            attention_mask=packed.attention_mask(torch.float32),
            **extra,
        ).logits[0]
    torch.testing.assert_close(got, padded[packed.rows, packed.columns], rtol=1e-4, atol=1e-4)
