"""What the tiny VLM's image path can learn: a supervised probe on three image sets.

Trains the tiny Qwen2-VL (``hfsdk_vision.model``, untrained) to answer a colour after the
``shapes`` prompt (teacher-forced one-token answer, the loss through ``response_log_probs``,
AdamW, batch 16) and prints the loss and the vision tower's gradient norm:

- ``solid``: the whole image one colour (the answer);
- ``shapes``: the ``shapes`` task's images (mean-grey background), the largest shape's colour;
- ``shapes-white``: the same images with a white background, where an earlier version of the
  task (which colour is the *square*, on white) stalled at chance.

    .venv/bin/python benchmarks/vision_warm_start_probe.py shapes --lr 3e-3 --steps 60

Results are in docs/multimodal.md (How the task was made learnable).
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from typing import Any

import torch
from PIL import Image

from hfsdk_vision.data import decode_image
from hfsdk_vision.log_probs import response_log_probs
from hfsdk_vision.model import ensure_tiny_vlm, load_tiny_vlm
from hfsdk_vision.shapes import BACKGROUND, COLOURS, PROMPT, shapes_rows, tokenizer_corpus
from hfsdk_vision.tokens import expand_placeholders

NAMES = list(COLOURS)
WHITE = (255, 255, 255)


def _images(mode: str, n: int, rng: random.Random) -> tuple[list, list]:
    images, answers = [], []
    if mode == "solid":
        for _ in range(n):
            colour = rng.choice(NAMES)
            images.append([Image.new("RGB", (56, 56), COLOURS[colour])])
            answers.append(colour)
        return images, answers
    for row in shapes_rows(n, seed=rng.randint(0, 10**6)):
        image = decode_image(row["images"][0], "probe")
        if mode == "shapes-white":
            pixels = image.get_flattened_data()
            white = bytes(b for px in pixels for b in (WHITE if px == BACKGROUND else px))
            image = Image.frombytes("RGB", image.size, white)
        images.append([image])
        answers.append(row["answer"])
    return images, answers


def main() -> None:
    """Run the probe (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["solid", "shapes", "shapes-white"])
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--vision-lr-scale", type=float, default=1.0)
    args = parser.parse_args()
    torch.manual_seed(0)
    # The model is built fresh in a folder removed at the end (mkdtemp left one per run).
    with tempfile.TemporaryDirectory(prefix="hfsdk_vision_probe_") as cache_dir:
        model, processor = load_tiny_vlm(ensure_tiny_vlm(tokenizer_corpus(), cache_dir=cache_dir))
        _train(model, processor, args)


def _train(model: Any, processor: Any, args: argparse.Namespace) -> None:
    """Train ``args.steps`` steps, printing every tenth step and the last."""
    vision = [p for n, p in model.named_parameters() if "visual" in n]
    text = [p for n, p in model.named_parameters() if "visual" not in n]
    optimizer = torch.optim.AdamW(
        [{"params": vision, "lr": args.lr * args.vision_lr_scale}, {"params": text, "lr": args.lr}]
    )
    rng = random.Random(0)
    model.train()
    started = time.perf_counter()
    for step in range(args.steps):
        images, answers = _images(args.mode, 16, rng)
        texts = [f"{expand_placeholders(PROMPT)} {answer}" for answer in answers]
        enc = processor(texts, images)
        log_probs = response_log_probs(model, response_width=1, **enc)
        loss = -log_probs.mean()
        optimizer.zero_grad()
        loss.backward()
        grad = sum(float(p.grad.norm()) ** 2 for p in vision if p.grad is not None) ** 0.5
        optimizer.step()
        if step % 10 == 0 or step == args.steps - 1:
            elapsed = time.perf_counter() - started
            print(f"step {step:3d}  loss {loss.item():.3f}  vision grad {grad:.2e}  {elapsed:.0f}s")


if __name__ == "__main__":
    main()
