"""fsdp ``gradient_checkpointing``: the same gradients as without it, fewer saved activations."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from hfsdk import position_ids_from_mask
from hfsdk.core.batch import Batch
from hfsdk_backend_common.lora_config import LoraConfig
from hfsdk_backend_fsdp.actor import ActorEngine
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig

PROMPT, RESPONSE, ROWS = 6, 5, 4


def _batch(vocab: int) -> Batch:
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(3, vocab, (ROWS, PROMPT + RESPONSE), generator=generator)
    mask = torch.ones_like(ids)
    mask[1, :2] = 0
    response_mask = torch.ones(ROWS, RESPONSE, dtype=torch.long)
    response_mask[2, 3:] = 0
    mask[:, PROMPT:] = response_mask
    return Batch.from_dict(
        tensors={
            "input_ids": ids,
            "attention_mask": mask,
            "position_ids": position_ids_from_mask(mask),
            "responses": ids[:, PROMPT:],
            "response_mask": response_mask,
            "advantages": torch.randn(ROWS, RESPONSE, generator=generator),
        }
    )


def _gradients(model_dir: Path, **settings: object) -> tuple[dict[str, torch.Tensor], int]:
    """Gradients of sum(advantage · log-prob) and the bytes autograd kept for backward."""
    config = FSDPRoleConfig(model_path=str(model_dir), **settings)  # type: ignore[arg-type]
    actor = ActorEngine(config, role="actor")
    batch = _batch(actor.module.config.vocab_size)
    saved = [0]

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        saved[0] += tensor.numel() * tensor.element_size()
        return tensor

    actor.module.train()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        log_probs, _ = actor._response_outputs(batch, 1.0, "none")
        loss = (log_probs * batch["advantages"] * batch["response_mask"]).sum()
    loss.backward()
    grads = {n: p.grad.clone() for n, p in actor.module.named_parameters() if p.grad is not None}
    return grads, saved[0]


@pytest.mark.parametrize("lora", [0, 4], ids=["full", "lora"])
def test_checkpointing_gives_the_same_gradients_and_keeps_less(model_dir: Path, lora: int) -> None:
    # With LoRA only the adapters get gradients (A's are 0 while B is 0, so at least B's
    # must be non-zero); the frozen embedding's output is made to need a gradient.
    settings = {"lora": LoraConfig(rank=lora)} if lora else {}
    plain, saved_plain = _gradients(model_dir, **settings)
    checkpointed, saved_ckpt = _gradients(model_dir, gradient_checkpointing=True, **settings)
    assert plain.keys() == checkpointed.keys() and plain
    for name, grad in plain.items():
        # float32 and the same kernels: the recomputed forward is bit-for-bit the first one.
        torch.testing.assert_close(checkpointed[name], grad, rtol=1e-5, atol=1e-7, msg=name)
    assert sum(int(g.abs().sum() > 0) for g in plain.values()) >= len(plain) // 2
    assert saved_ckpt < 0.7 * saved_plain, (saved_ckpt, saved_plain)
