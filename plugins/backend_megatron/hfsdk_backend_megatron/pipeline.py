"""A pipeline schedule of our own over ``torch.distributed`` send/recv: all forward, all backward.

megatron-core's schedules and p2p helpers allocate their buffers on
``device="cuda"``, so they cannot run on CPU. This schedule runs every
micro-batch forward through the stages (activations sent to the next
stage), then every micro-batch backward in reverse order (activation
gradients sent to the previous stage) — GPipe's order. It keeps all
micro-batches' activations alive until the backward (more memory than
megatron's 1F1B) but it is short, deadlock-free with blocking gloo
send/recv, and runs on any device; on GPU it is the same code with NCCL.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.distributed as dist

StageForward = Callable[[Any, torch.Tensor | None], torch.Tensor]
"""``(micro, received_hidden_or_None) -> this stage's output`` for one micro-batch."""
LastStage = Callable[[Any, torch.Tensor], torch.Tensor | None]
"""``(micro, last_stage_output) -> loss to backpropagate (or None)`` on the last stage."""


def run_pipeline(
    micros: Sequence[Any],
    forward: StageForward,
    last_stage: LastStage,
    *,
    hidden_shape: Callable[[Any], tuple[int, ...]],
    dtype: torch.dtype,
    device: torch.device,
    backward: bool,
) -> None:
    """Run ``micros`` through this rank's stage; ``last_stage`` sees the outputs of the last.

    ``hidden_shape(micro)`` is the activation shape sent between stages
    (megatron's ``[s, b, h]``). With ``backward`` the losses returned by
    ``last_stage`` are backpropagated through every stage.
    """
    from megatron.core import parallel_state as mpu

    first = mpu.is_pipeline_first_stage()
    last = mpu.is_pipeline_last_stage()
    prev_rank = None if first else mpu.get_pipeline_model_parallel_prev_rank()
    next_rank = None if last else mpu.get_pipeline_model_parallel_next_rank()
    saved: list[tuple[torch.Tensor | None, torch.Tensor | None]] = []
    for micro in micros:
        received = None
        if not first:
            received = torch.empty(hidden_shape(micro), dtype=dtype, device=device)
            dist.recv(received, src=prev_rank)
            if backward:
                received.requires_grad_(True)
        output = forward(micro, received)
        if last:
            loss = last_stage(micro, output)
            saved.append((received, loss if backward else None))
        else:
            dist.send(output.detach().contiguous(), dst=next_rank)
            saved.append((received, output if backward else None))
    if not backward:
        return
    for micro, (received, output) in reversed(list(zip(micros, saved, strict=True))):
        if last:
            if output is not None:
                output.backward()
        else:
            assert output is not None
            grad = torch.empty_like(output)
            dist.recv(grad, src=next_rank)
            torch.autograd.backward(output, grad)
        if not first:
            assert received is not None
            grad_in = received.grad if received.grad is not None else torch.zeros_like(received)
            dist.send(grad_in.contiguous(), dst=prev_rank)
        del micro
