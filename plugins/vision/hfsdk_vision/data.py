"""verl's multimodal parquet layout loaded into image prompts, every image decoded up front.

verl's Qwen2.5-VL datasets (e.g. its geo3k preprocessing) have a ``prompt`` column — chat
messages (``[{"role": "user", "content": "<image>Find x ..."}]``) or a plain string — and an
``images`` column: a list per row whose items are ``{"bytes": ..., "path": ...}`` dicts (the
``datasets`` Image feature's storage), raw bytes, or paths. Each ``<image>`` in the prompt
takes the row's next image. All images are decoded when the file is loaded, so a broken one
stops the run before training with one line naming the file, row and image. TRL's
conversational layout (content parts ``{"type": "image"}``/``{"type": "text"}``, an ``images``
or ``image`` column) loads the same way.
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from hfsdk import DATA_DIR, HfsdkError
from hfsdk_vision.tokens import IMAGE_PLACEHOLDER, VISION_TOKENS, expand_placeholders

if TYPE_CHECKING:
    from PIL.Image import Image

    from hfsdk_vision.processor import VisionProcessor


@attrs.frozen(kw_only=True)
class ImagePrompt:
    """One row: its prompt text (``<image>`` placeholders kept), decoded RGB images, and the
    other columns (e.g. ``answer``/``reward_model``) for the reward function."""

    row: int
    text: str
    images: tuple[Image, ...]
    columns: dict[str, Any] = attrs.field(factory=dict)


INLINE_IMAGE_KEYS = ("image", "url", "path")
"""Keys of an image content part that carry the image itself, which is not read: a row's
images come from its ``images`` list (the datasets plugin's chat rendering refuses the same)."""


def inline_image(part: Mapping[str, Any]) -> tuple[str, Any] | None:
    """``(key, value)`` of an image content part that carries its image inline (TRL's
    ``{"type": "image", "image": "x.png"}``, a ``url`` or ``path``), else ``None``; parquet
    gives every part every key of the column, so a ``None`` value carries nothing."""
    for key in INLINE_IMAGE_KEYS:
        value = part.get(key)
        if value is not None and not (isinstance(value, str | bytes) and not value):
            return key, value
    return None


def inline_image_message(where: str, number: int, key: str, value: Any) -> str:
    """The one-line refusal of content part ``number`` carrying its image inline."""
    return (
        f"{where}: content part {number} carries its image inline ({key}={shorten(value)}), "
        "which is not read (the part would become a bare '<image>' and the run train on the "
        "text alone); move the image to the row's 'images' list and write the part as "
        "{'type': 'image'}"
    )


SHOWN_CHARS = 200
"""How much of a value (a path, a ``data:`` URI) an error quotes."""


def shorten(value: Any) -> str:
    """``repr(value)`` cut to :data:`SHOWN_CHARS` characters: a base64 ``data:`` URI read as a
    path made an error line of hundreds of kilobytes."""
    shown = repr(value)
    return shown if len(shown) <= SHOWN_CHARS else shown[:SHOWN_CHARS] + "…"


def _content_text(content: Any, where: str) -> str | None:
    """A message's content as text: a string as is; TRL's list of parts with each
    ``{"type": "image"}`` as ``<image>`` and each ``{"type": "text", "text": ...}`` as its
    text, joined by spaces; ``None`` for anything else. An image part that carries its image
    inline (``"image"``/``"url"``/``"path"``) is refused, naming ``where``."""
    if isinstance(content, str):
        return content
    if not isinstance(content, Sequence) or not all(isinstance(p, dict) for p in content):
        return None
    pieces = []
    for number, part in enumerate(content):
        if part.get("type") == "image":
            inline = inline_image(part)
            if inline is not None:
                raise HfsdkError(inline_image_message(where, number, *inline))
            pieces.append(IMAGE_PLACEHOLDER)
        elif part.get("type") == "text" and isinstance(part.get("text"), str):
            pieces.append(part["text"])
        else:
            return None
    return " ".join(pieces)


def _render(prompt: Any, where: str) -> str:
    """The prompt column's text: a string as is, chat messages' contents joined by newlines."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, Sequence) and all(isinstance(m, dict) for m in prompt):
        contents = [_content_text(m.get("content"), where) for m in prompt]
        if all(c is not None for c in contents):
            return "\n".join(c for c in contents if c is not None)
    raise HfsdkError(
        f"{where}: the 'prompt' column holds {type(prompt).__name__}; expected a string or chat "
        "messages ([{'role': ..., 'content': '<image>...'}]; TRL's content parts "
        "[{'type': 'image'}, {'type': 'text', 'text': ...}] too)"
    )


def row_base(row: Mapping[str, Any]) -> Path | None:
    """The folder a row's relative image paths resolve from: its data file's (the loader's
    ``data_dir`` column), else ``None`` (the working directory)."""
    folder = row.get(DATA_DIR)
    return Path(folder) if folder else None


URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
"""A URL's scheme (``https://``, ``s3://``): hfsdk never downloads, so such a path is refused."""


def _is_url(value: Any) -> bool:
    """Whether ``value`` is a URL: a string, or bytes holding one (a path column stored as
    binary; image bytes never start with ``scheme://``)."""
    if isinstance(value, bytes | bytearray):
        value = bytes(value[:256]).decode("ascii", errors="replace")
    return isinstance(value, str) and bool(URL.match(value))


DATA_URI = re.compile(r"^data:image/[A-Za-z0-9.+-]+;base64,", re.IGNORECASE)
"""A base64 ``data:`` URI of an image (as chat APIs embed one): its bytes are decoded, never
read as a file path."""


def _data_uri_bytes(value: str, where: str) -> bytes | None:
    """The image bytes of a base64 ``data:image/...`` URI; ``None`` for anything else."""
    import base64
    import binascii

    match = DATA_URI.match(value)
    if match is None:
        return None
    try:
        # Line-wrapped base64 (base64.encodebytes, MIME tools) is the same data: drop the breaks.
        return base64.b64decode("".join(value[match.end() :].split()), validate=True)
    except (binascii.Error, ValueError) as err:
        raise HfsdkError(
            f"{where} is a data: URI whose base64 does not decode ({err}); give "
            "'data:image/png;base64,<base64 of the file>', the file's path or its bytes"
        ) from None


def _base64_bytes(value: str, where: str) -> bytes:
    """The bytes of an item's ``bytes`` key holding text: JSON cannot hold raw bytes, so a JSON
    lines row's ``{"bytes": ...}`` holds the image file as base64."""
    import base64
    import binascii

    try:
        # Strict, whitespace aside (line-wrapped base64): a path here must not decode as noise.
        return base64.b64decode("".join(value.split()), validate=True)
    except (binascii.Error, ValueError):
        raise HfsdkError(
            f"{where} has 'bytes' holding text that is not base64 ({shorten(value)}); give the "
            "base64 of the image file there, its path under 'path', or a "
            "'data:image/png;base64,...' URI"
        ) from None


def _on_white(image: Image) -> Image:
    """``image`` as RGB, transparent pixels white: ``convert("RGB")`` alone shows their hidden
    colour (usually black, so a black drawing on a transparent background turns all black),
    where verl's ``fetch_image`` pastes onto white."""
    from PIL import Image as PILImage

    if image.mode in ("RGBA", "LA", "PA", "RGBa", "La") or "transparency" in image.info:
        rgba = image.convert("RGBA")
        white = PILImage.new("RGBA", rgba.size, (255, 255, 255, 255))
        return PILImage.alpha_composite(white, rgba).convert("RGB")
    return image.convert("RGB")


def _text(value: str | bytes | bytearray) -> str:
    """``value`` as text, for a message."""
    return value if isinstance(value, str) else bytes(value).decode("utf-8", errors="replace")


def resolved_item(item: Any, base: Path | None) -> Any:
    """``item`` with a relative path (a string or a ``{"path": ...}`` without bytes) made
    absolute from ``base``; anything else (a URL included) as it is."""
    if base is None or _is_url(item) or (isinstance(item, str) and DATA_URI.match(item)):
        return item
    if isinstance(item, str):
        path = Path(item).expanduser()
        return item if path.is_absolute() else str(base / path)
    if isinstance(item, Mapping) and not item.get("bytes") and isinstance(item.get("path"), str):
        return {**item, "path": resolved_item(item["path"], base)}
    return item


def decode_image(item: Any, where: str, base: Path | None = None) -> Image:
    """An RGB PIL image (transparent pixels white) from a verl ``images`` item: ``{"bytes":
    ...}`` (raw bytes or their base64 text)/``{"path": ...}``, raw bytes, a path (relative paths
    from ``base``), a ``data:`` URI or a PIL image; one line naming ``where`` when it fails."""
    from PIL import Image as PILImage
    from PIL import UnidentifiedImageError

    if isinstance(item, PILImage.Image):
        # datasets' Image feature hands over PIL images: check them as decoded bytes are.
        return _on_white(_checked(item, where))

    source: Any = item
    if isinstance(item, dict):
        source = item.get("bytes") or item.get("path")
    if _is_url(source):
        raise HfsdkError(
            f"{where} is the URL {shorten(_text(source))}, which hfsdk does not fetch (it never "
            "downloads); download the image and give a local path, or its bytes ({'bytes': ...})"
        )
    bytes_text = item.get("bytes") if isinstance(item, dict) else None
    if isinstance(bytes_text, str) and bytes_text and not DATA_URI.match(bytes_text):
        source = _base64_bytes(bytes_text, where)
    if isinstance(source, str):
        data = _data_uri_bytes(source, where)
        source = data if data is not None else Path(resolved_item(source, base)).expanduser()
    try:
        if isinstance(source, bytes | bytearray):
            image = PILImage.open(io.BytesIO(source))
        elif isinstance(source, Path):
            image = PILImage.open(source)
        else:
            raise UnidentifiedImageError(f"an images item of type {type(item).__name__}")
        image.load()
    except (OSError, UnidentifiedImageError, ValueError, PILImage.DecompressionBombError) as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        if isinstance(err, UnidentifiedImageError) and not isinstance(source, Path):
            first = "not an image file"  # PIL's words name its BytesIO object, not the data
        if len(first) > SHOWN_CHARS:  # it quotes the path, which may be long (a data: URI)
            first = first[:SHOWN_CHARS] + "…"
        raise HfsdkError(
            f"{where} could not be decoded ({first}); expected PNG/JPEG bytes "
            "({'bytes': ...}) or a readable image path — fix or drop that row"
        ) from None
    return _on_white(_checked(image, where))


WIDE_MODES = ("I;16", "I;16B", "I;16L", "I;16N", "I", "F")
"""16-bit and float modes: ``convert("RGB")`` clips them to white instead of scaling them."""
MAX_ASPECT = 200
"""The longest side over the shortest the Qwen2-VL image processor takes."""


def _checked(image: Image, where: str) -> Image:
    """``image`` unless the processor would garble it (a wide mode) or refuse it (its shape)."""
    if image.mode in WIDE_MODES:
        raise HfsdkError(
            f"{where} is a {image.mode!r} image (16-bit or float), which would reach the model "
            "clipped to white; save it as 8-bit (RGB or L)"
        )
    width, height = image.size
    # Strictly above, as the processor refuses: a 400x2 image (exactly 200:1) encodes.
    if max(width, height) > MAX_ASPECT * min(width, height):
        raise HfsdkError(
            f"{where} is {width}x{height} pixels; the image processor takes sides within "
            f"{MAX_ASPECT}:1 of each other — crop or pad it"
        )
    return image


def image_list(value: Any, where: str, *, single: bool = False) -> list[Any]:
    """A row's images as a list: its ``images`` value (a list, tuple or 1-D array of items;
    ``None`` for none) or, with ``single``, TRL's one-image ``image`` value (``None`` for none).

    Raises one :class:`hfsdk.HfsdkError` naming ``where`` for a lone item in the ``images``
    column (a path, bytes, a ``{"bytes", "path"}`` dict, a PIL image): iterating it would read
    a path by character and a dict by its keys.
    """
    if value is None:
        return []
    if single:
        return [value]
    if isinstance(value, list | tuple) or (_is_array(value) and value.ndim == 1):
        return list(value)
    raise HfsdkError(
        f"{where}: images must be a list of images per row (got a {type(value).__name__}); "
        "wrap it in a list"
    )


def _is_array(value: Any) -> bool:
    """Whether ``value`` is a numpy array (a batch's object column gives rows as arrays)."""
    import numpy as np

    return isinstance(value, np.ndarray)


def check_image_prompt(
    text: str, items: Sequence[Any], where: str, base: Path | None = None
) -> list[Image]:
    """The decoded images of one prompt (paths relative to ``base``), once its text has one
    ``<image>`` per image and none of the model's own vision tokens (which the processor
    would count as more images)."""
    literal = [token for token in VISION_TOKENS if token in text]
    if literal:
        raise HfsdkError(
            f"{where}: the prompt holds the vision token {literal[0]!r} as text; mark each "
            f"image with one {IMAGE_PLACEHOLDER!r} and leave the model's tokens out"
        )
    if text.count(IMAGE_PLACEHOLDER) != len(items):
        raise HfsdkError(
            f"{where}: the prompt has {text.count(IMAGE_PLACEHOLDER)} '<image>' placeholders but "
            f"the row has {len(items)} images; put one '<image>' in the prompt per image"
        )
    return [decode_image(item, f"{where}, image {j}", base) for j, item in enumerate(items)]


def load_verl_parquet(path: str | Path) -> list[ImagePrompt]:
    """Every row of a verl multimodal parquet file as an :class:`ImagePrompt`, images decoded.

    TRL's conversational image layout loads too: content parts (``{"type": "image"}`` become
    ``<image>``) and an ``images`` list or a single ``image`` column (``datasets`` stores an
    Image feature as ``{"bytes": ..., "path": ...}``).

    Raises one :class:`hfsdk.HfsdkError` for the first row whose image does not decode or whose
    ``<image>`` count differs from its image count.
    """
    import pyarrow.parquet as pq

    path = Path(path)
    try:
        rows = pq.read_table(path).to_pylist()
    except (OSError, ValueError) as err:
        raise HfsdkError(
            f"{path}: not a readable parquet file ({err}); pass a .parquet file"
        ) from None
    prompts = []
    for index, row in enumerate(rows):
        where = f"{path}: row {index}"
        image_key = "images" if "images" in row else "image"
        if "prompt" not in row or image_key not in row:
            raise HfsdkError(
                f"{path}: has columns {sorted(row)}; a multimodal file needs 'prompt' and "
                "'images' (verl; TRL: 'images', or 'image' for one per row)"
            )
        text = _render(row["prompt"], where)
        value = row[image_key]
        items = image_list(value, where, single=image_key == "image")
        images = tuple(check_image_prompt(text, items, where, base=path.parent))
        columns = {k: v for k, v in row.items() if k not in ("prompt", image_key)}
        prompts.append(ImagePrompt(row=index, text=text, images=images, columns=columns))
    return prompts


def encode_prompts(processor: VisionProcessor, prompts: Sequence[ImagePrompt]) -> dict[str, Any]:
    """Model inputs of ``prompts`` (left-padded ids, pixel values, grids, images per row)."""
    return processor(
        [expand_placeholders(p.text) for p in prompts], [list(p.images) for p in prompts]
    )
