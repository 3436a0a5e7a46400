"""Small deterministic test images."""

from __future__ import annotations

import numpy as np
from PIL import Image


def noise_image(seed: int, height: int = 56, width: int = 56) -> Image.Image:
    """A random RGB image (the same for the same arguments)."""
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 255, (height, width, 3), dtype=np.uint8))
