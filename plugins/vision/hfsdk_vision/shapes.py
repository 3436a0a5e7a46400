"""The ``shapes`` visual data and reward: which colour is the square?

Each image (56 px square, white) holds a square and a circle of two different colours; the
prompt asks for the square's colour. A policy that ignores the image can at best guess among
the colours, so a reward above chance is evidence that the model reads the image.
Rows are written in verl's multimodal parquet layout (``prompt`` chat messages with an
``<image>`` placeholder, ``images`` as ``[{"bytes": png}]``, ``answer``).
"""

from __future__ import annotations

import io
import random
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hfsdk import HfsdkError

if TYPE_CHECKING:
    from PIL.Image import Image

COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 30, 30),
    "green": (30, 170, 30),
    "blue": (30, 60, 220),
    "yellow": (230, 200, 20),
}
QUESTION = "what colour is the square ?"
PROMPT = f"<image> {QUESTION}"
REWARD_FUNCTION_NAME = "shapes"
"""Registry name of :func:`shapes_reward`."""

_WORD = re.compile(r"[a-z]+")


def draw(square: str, circle: str, rng: random.Random, size: int = 56) -> Image:
    """A ``size`` px white image with a ``square``-coloured square and a ``circle``-coloured
    circle, side by side in a random order, at jittered places and sizes."""
    from PIL import Image as PILImage
    from PIL import ImageDraw

    image = PILImage.new("RGB", (size, size), (255, 255, 255))
    canvas = ImageDraw.Draw(image)
    half = size // 2
    slots = [0, half]
    rng.shuffle(slots)
    for kind, colour, left in (("square", square, slots[0]), ("circle", circle, slots[1])):
        side = rng.randint(half * 5 // 10, half * 8 // 10)
        x = left + rng.randint(1, half - side - 1)
        y = rng.randint(1, size - side - 1)
        box = (x, y, x + side, y + side)
        if kind == "square":
            canvas.rectangle(box, fill=COLOURS[colour])
        else:
            canvas.ellipse(box, fill=COLOURS[colour])
    return image


def png_bytes(image: Image) -> bytes:
    """``image`` encoded as PNG."""
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def shapes_rows(count: int, seed: int = 0, size: int = 56) -> list[dict[str, Any]]:
    """``count`` rows in verl's multimodal layout, reproducible from ``seed``."""
    rng = random.Random(seed)
    names = list(COLOURS)
    rows = []
    for _ in range(count):
        square, circle = rng.sample(names, 2)
        image = draw(square, circle, rng, size)
        rows.append(
            {
                "prompt": [{"role": "user", "content": PROMPT}],
                "images": [{"bytes": png_bytes(image), "path": None}],
                "answer": square,
            }
        )
    return rows


def write_parquet(rows: Sequence[dict[str, Any]], path: str | Path) -> Path:
    """Write ``rows`` to ``path`` as parquet (a temp file renamed into place)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from hfsdk import atomic_path

    path = Path(path)
    with atomic_path(path) as tmp:
        pq.write_table(pa.Table.from_pylist(list(rows)), tmp)
    return path


def tokenizer_corpus() -> list[str]:
    """Every word the task's prompts and answers use (the tiny tokenizer's training text).

    ``<image>`` is a word too: a run's prompt loader tokenises the raw prompt (placeholder
    included) to measure and check it before the rollout expands the placeholder."""
    return [PROMPT, "circle", *COLOURS]


def shapes_reward(
    prompts: list[str],
    responses: list[str],
    answer: Sequence[Any] | None = None,
    **columns: Any,
) -> list[float]:
    """1.0 where the response's first word is the square's colour (the ``answer`` column)."""
    if answer is None:
        raise HfsdkError(
            "the shapes reward needs the 'answer' column (the square's colour); keep it in the "
            "data file"
        )
    if not len(prompts) == len(responses) == len(answer):
        raise HfsdkError(
            f"got {len(prompts)} prompts, {len(responses)} responses and {len(answer)} answers; "
            "pass one of each per sample"
        )
    scores = []
    for response, target in zip(responses, answer, strict=True):
        match = _WORD.search(response.lower())
        scores.append(1.0 if match is not None and match.group() == str(target) else 0.0)
    return scores
