"""The ``shapes`` visual data and reward: what colour is the largest shape?

Each image (56 px, a grey background) holds a large shape and a small one (each a square or
a circle) of two different colours; the prompt asks for the largest shape's colour. A policy
that ignores the image can at best guess among the four colours (1 in 4), so a reward above
that is evidence that the model reads the image.
Rows are written in verl's multimodal parquet layout (``prompt`` chat messages with an
``<image>`` placeholder, ``images`` as ``[{"bytes": png}]``, ``answer``).

The background is the image processor's mean colour (Qwen2-VL's normalisation maps it to
about 0): on white, every background patch was one large vector shared by all images, the
shapes' colours a small part of the features, and a supervised warm start of the tiny model
stalled at chance (docs/multimodal.md, benchmarks/vision_warm_start_probe.py).
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
BACKGROUND = (122, 116, 104)
"""The images' background: Qwen2-VL's image mean (0.481, 0.458, 0.408) in 8-bit RGB."""
QUESTION = "what colour is the largest shape ?"
PROMPT = f"<image> {QUESTION}"
REWARD_FUNCTION_NAME = "shapes"
"""Registry name of :func:`shapes_reward`."""

_WORD = re.compile(r"[a-z]+")


def draw(large: str, small: str, rng: random.Random, size: int = 56) -> Image:
    """A ``size`` px image: a ``large``-coloured shape over half to four fifths of its side and a
    ``small``-coloured one under a quarter of it, apart, each a square or a circle, at random
    places."""
    from PIL import Image as PILImage
    from PIL import ImageDraw

    image = PILImage.new("RGB", (size, size), BACKGROUND)
    canvas = ImageDraw.Draw(image)
    big = rng.randint(size * 55 // 100, size * 80 // 100)
    x, y = rng.randint(0, size - big), rng.randint(0, size - big)
    little = rng.randint(size * 14 // 100, size * 24 // 100)
    # The small shape goes where it does not touch the large one (the first free place found).
    spots = [(sx, sy) for sx in range(size - little + 1) for sy in range(size - little + 1)]
    free = [
        (sx, sy)
        for sx, sy in spots
        if sx + little <= x or sx >= x + big or sy + little <= y or sy >= y + big
    ]
    sx, sy = rng.choice(free) if free else (0, 0)
    for colour, side, left, top in ((large, big, x, y), (small, little, sx, sy)):
        box = (left, top, left + side - 1, top + side - 1)
        paint = canvas.rectangle if rng.random() < 0.5 else canvas.ellipse
        paint(box, fill=COLOURS[colour])
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
        large, small = rng.sample(names, 2)
        image = draw(large, small, rng, size)
        rows.append(
            {
                "prompt": [{"role": "user", "content": PROMPT}],
                "images": [{"bytes": png_bytes(image), "path": None}],
                "answer": large,
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
    return [PROMPT, "square circle", *COLOURS]


def shapes_reward(
    prompts: list[str],
    responses: list[str],
    answer: Sequence[Any] | None = None,
    **columns: Any,
) -> list[float]:
    """1.0 where the response's first word is the largest shape's colour (the ``answer``
    column)."""
    if answer is None:
        raise HfsdkError(
            "the shapes reward needs the 'answer' column (the largest shape's colour); keep it in "
            "the data file"
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
