"""One process: a megatron actor's gradients with and without activation recompute (a script).

Run by ``test_recompute.py`` in a subprocess, because megatron-core's parallel
state (and the one-rank gloo group it needs) is global to the process.
Writes ``{"plain": grads, "recompute": grads, "saved": {...}}`` to ``--out``.
"""

from __future__ import annotations

import argparse
from typing import Any

import torch

from hfsdk import position_ids_from_mask
from hfsdk.core.batch import Batch
from hfsdk_backend_megatron.engine import MegatronEngine
from hfsdk_backend_megatron.megatron_config import MegatronRoleConfig

PROMPT, RESPONSE, ROWS = 6, 5, 4


def _batch(vocab: int) -> Batch:
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(3, vocab, (ROWS, PROMPT + RESPONSE), generator=generator)
    mask = torch.ones_like(ids)
    mask[1, :2] = 0  # a left-padded prompt
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


def gradients(path: str, recompute: bool) -> tuple[dict[str, torch.Tensor], int]:
    """Parameter gradients of sum(advantage · log-prob) and the bytes autograd saved."""
    from megatron.core import parallel_state as mpu

    mpu.destroy_model_parallel()
    config = MegatronRoleConfig(model_path=path, device="cpu", gradient_checkpointing=recompute)
    eng = MegatronEngine(config, role="actor", kind="actor")
    batch = _batch(eng.shape.vocab_size)
    saved = [0]

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        saved[0] += tensor.numel() * tensor.element_size()
        return tensor

    def last(micro: Batch, logits: torch.Tensor) -> torch.Tensor:
        log_probs, _ = eng._response_log_probs(logits, micro, 1.0, False)
        weight = micro["advantages"] * micro["response_mask"]
        return (log_probs * weight).sum()

    eng.model.train()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        eng._pipeline([batch], last, backward=True)
    return {n: p.grad.clone() for n, p in eng.model.named_parameters()}, saved[0]


def main() -> None:
    """Parse ``--model`` and ``--out`` and write both runs' gradients."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    result: dict[str, Any] = {"saved": {}}
    for name, recompute in (("plain", False), ("recompute", True)):
        grads, saved = gradients(args.model, recompute)
        result[name] = grads
        result["saved"][name] = saved
    torch.save(result, args.out)


if __name__ == "__main__":
    main()
