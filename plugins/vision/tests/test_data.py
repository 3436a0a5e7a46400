"""verl's multimodal parquet layout: bytes dicts, raw bytes and paths load; bad rows are named."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hfsdk import HfsdkError
from hfsdk_vision.data import decode_image, encode_prompts, load_verl_parquet
from hfsdk_vision.shapes import png_bytes

from .images import noise_image


def _write(path: Path, rows: list[dict]) -> Path:
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def test_verl_rows_load_with_their_images_and_columns(tmp_path: Path, vlm) -> None:
    _, processor = vlm
    on_disk = tmp_path / "img" / "b.png"
    on_disk.parent.mkdir()
    noise_image(2, 30, 60).save(on_disk)
    rows = [
        {
            "prompt": [{"role": "user", "content": "<image> what colour is the square ?"}],
            "images": [{"bytes": png_bytes(noise_image(0)), "path": None}],
            "answer": "red",
        },
        {
            "prompt": [{"role": "user", "content": "<image> <image> red"}],
            "images": [{"bytes": None, "path": "img/b.png"}, {"bytes": png_bytes(noise_image(1))}],
            "answer": "blue",
        },
    ]
    prompts = load_verl_parquet(_write(tmp_path / "train.parquet", rows))
    assert [p.row for p in prompts] == [0, 1]
    assert prompts[1].columns == {"answer": "blue"}
    assert [len(p.images) for p in prompts] == [1, 2]
    assert prompts[1].images[0].size == (60, 30)  # the relative path, from the file's folder
    assert prompts[0].images[0].tobytes() == noise_image(0).tobytes()
    enc = encode_prompts(processor, prompts)
    assert enc["images_per_row"].tolist() == [1, 2]
    assert enc["image_grid_thw"].shape == (3, 3)


def test_plain_string_prompts_and_raw_bytes_load(tmp_path: Path) -> None:
    rows = [{"prompt": "<image> hi", "images": [png_bytes(noise_image(0))]}]
    (prompt,) = load_verl_parquet(_write(tmp_path / "p.parquet", rows))
    assert prompt.text == "<image> hi" and prompt.images[0].mode == "RGB"


def test_an_image_that_does_not_decode_is_named_with_its_row(tmp_path: Path) -> None:
    good = {"bytes": png_bytes(noise_image(0))}
    broken = png_bytes(noise_image(1))[:40]  # a truncated PNG
    rows = [{"prompt": "<image> a", "images": [good]}] * 2 + [
        {"prompt": "<image> <image> b", "images": [good, {"bytes": broken}]}
    ]
    path = _write(tmp_path / "bad.parquet", rows)
    with pytest.raises(HfsdkError) as err:
        load_verl_parquet(path)
    message = str(err.value)
    assert message.startswith(f"{path}: row 2, image 1 could not be decoded (")
    assert "fix or drop that row" in message and "\n" not in message


def test_a_missing_image_path_is_named(tmp_path: Path) -> None:
    rows = [{"prompt": "<image> a", "images": [{"bytes": None, "path": "nowhere.png"}]}]
    with pytest.raises(HfsdkError, match=r"row 0, image 0 could not be decoded"):
        load_verl_parquet(_write(tmp_path / "p.parquet", rows))


@pytest.mark.parametrize(
    "item",
    [
        "https://example.com/a.png",
        {"bytes": None, "path": "s3://bucket/a.png"},
        b"https://example.com/a.png",
    ],
)
def test_a_remote_url_is_named_as_not_fetched(tmp_path: Path, item: object) -> None:
    # It was reported as a missing file under the data folder ('.../https:/example.com/a.png').
    rows = [{"prompt": "<image> a", "images": [item]}]
    with pytest.raises(HfsdkError) as err:
        load_verl_parquet(_write(tmp_path / "u.parquet", rows))
    message = str(err.value)
    assert "row 0, image 0 is the URL" in message and "://" in message
    assert "does not fetch (it never downloads); download the image and give a local path" in (
        message
    )
    assert str(tmp_path) + "/http" not in message and "\n" not in message


def test_placeholders_and_images_out_of_step_name_the_row(tmp_path: Path) -> None:
    rows = [
        {"prompt": "<image> a", "images": [png_bytes(noise_image(0))]},
        {"prompt": "b", "images": [png_bytes(noise_image(0))]},
    ]
    with pytest.raises(HfsdkError, match=r"row 1: the prompt has 0 '<image>' placeholders but"):
        load_verl_parquet(_write(tmp_path / "p.parquet", rows))


def test_images_the_processor_would_garble_or_refuse_name_their_row(tmp_path: Path) -> None:
    from PIL import Image

    cases = {
        # 250:1, past the processor's 200:1
        r"image 0 is 2000x8 pixels; the image processor takes sides within 200:1": (2000, 8, "RGB"),
        # 16-bit: convert("RGB") would clip it to white
        r"row 0, image 0 is a 'I;16' image \(16-bit or float\)": (32, 32, "I;16"),
        # 200 M pixels: PIL's decompression-bomb error, no longer an internal error
        r"row 0, image 0 could not be decoded \(Image size .* exceeds limit": (20_000, 10_000, "1"),
    }
    for needle, (width, height, mode) in cases.items():
        rows = [{"prompt": "<image> a", "images": [png_bytes(Image.new(mode, (width, height)))]}]
        with pytest.raises(HfsdkError, match=needle):
            load_verl_parquet(_write(tmp_path / "p.parquet", rows))


def test_a_prompt_with_the_models_own_vision_tokens_is_refused(tmp_path: Path) -> None:
    rows = [{"prompt": "<image> <|image_pad|> a", "images": [png_bytes(noise_image(0))]}]
    with pytest.raises(HfsdkError, match=r"row 0: the prompt holds the vision token '<\|image_pad"):
        load_verl_parquet(_write(tmp_path / "p.parquet", rows))


def test_a_file_without_the_columns_is_refused(tmp_path: Path) -> None:
    with pytest.raises(HfsdkError, match="needs 'prompt' and 'images'"):
        load_verl_parquet(_write(tmp_path / "p.parquet", [{"question": "x"}]))


def test_trls_conversational_image_layout_loads(tmp_path: Path) -> None:
    parts = [
        {"type": "image", "text": None},
        {"type": "text", "text": "what colour is the square ?"},
    ]
    rows = [
        {
            "prompt": [{"role": "user", "content": parts}],
            "image": {"bytes": png_bytes(noise_image(0)), "path": None},
            "solution": "red",
        }
    ]
    (prompt,) = load_verl_parquet(_write(tmp_path / "trl.parquet", rows))
    assert prompt.text == "<image> what colour is the square ?"
    assert len(prompt.images) == 1 and prompt.columns == {"solution": "red"}


def test_unknown_content_parts_are_refused(tmp_path: Path) -> None:
    rows = [
        {"prompt": [{"role": "user", "content": [{"type": "audio", "text": None}]}], "images": []}
    ]
    with pytest.raises(HfsdkError, match=r"row 0: the 'prompt' column holds list"):
        load_verl_parquet(_write(tmp_path / "p.parquet", rows))


def test_pil_images_are_checked_as_decoded_bytes_are() -> None:
    from PIL import Image

    # datasets' Image feature loads rows as PIL images, not bytes
    with pytest.raises(HfsdkError, match=r"^row 0, image 0 is a 'I;16' image \(16-bit"):
        decode_image(Image.new("I;16", (32, 32)), "row 0, image 0")
    wide = Image.new("RGB", (4000, 10))
    with pytest.raises(HfsdkError) as from_pil:
        decode_image(wide, "row 0, image 0")
    with pytest.raises(HfsdkError) as from_bytes:
        decode_image(png_bytes(wide), "row 0, image 0")
    assert str(from_pil.value) == str(from_bytes.value)
    assert "4000x10 pixels" in str(from_pil.value)


@pytest.mark.parametrize(
    ("value", "kind"),
    [("img/a.png", "str"), ({"bytes": b"png", "path": None}, "dict"), (b"png", "bytes")],
)
def test_an_images_value_that_is_not_a_list_is_refused(
    tmp_path: Path, value: object, kind: str
) -> None:
    # A path was read character by character, a datasets Image dict by its keys.
    rows = [{"prompt": "<image> a", "images": value}]
    with pytest.raises(HfsdkError) as err:
        load_verl_parquet(_write(tmp_path / "p.parquet", rows))
    assert str(err.value) == (
        f"{tmp_path / 'p.parquet'}: row 0: images must be a list of images per row "
        f"(got a {kind}); wrap it in a list"
    )


def test_image_list_reads_a_rows_images() -> None:
    import numpy as np
    from PIL import Image

    from hfsdk_vision.data import image_list

    png = png_bytes(noise_image(0))
    assert image_list(None, "row 0") == []
    assert image_list([png], "row 0") == [png]
    assert image_list((png, png), "row 0") == [png, png]
    assert image_list(np.array([png, png], dtype=object), "row 0") == [png, png]
    # TRL's single 'image' column: one image per row, None for none.
    assert image_list(None, "row 0", single=True) == []
    assert image_list(png, "row 0", single=True) == [png]
    with pytest.raises(HfsdkError, match=r"^row 3: images must be a list .* \(got a Image\)"):
        image_list(Image.new("RGB", (4, 4)), "row 3")


def test_trls_single_image_column_reads_none_as_no_image(tmp_path: Path) -> None:
    def user(*parts: dict) -> list[dict]:
        return [{"role": "user", "content": list(parts)}]

    image = {"type": "image", "text": None}
    rows = [
        {"prompt": user(image, {"type": "text", "text": "what colour?"}),
         "image": {"bytes": png_bytes(noise_image(0)), "path": None}},
        {"prompt": user({"type": "text", "text": "say hi"}), "image": None},
    ]  # fmt: skip
    prompts = load_verl_parquet(_write(tmp_path / "trl.parquet", rows))
    assert [len(p.images) for p in prompts] == [1, 0]


def test_an_image_exactly_200_to_1_decodes() -> None:
    from PIL import Image

    # The Qwen2-VL processor refuses only ratios above 200 (it encodes 400x2).
    assert decode_image(Image.new("RGB", (400, 2)), "row 0, image 0").size == (400, 2)
    with pytest.raises(HfsdkError, match=r"is 402x2 pixels"):
        decode_image(Image.new("RGB", (402, 2)), "row 0, image 0")


def test_an_image_part_that_carries_its_image_inline_is_refused(tmp_path: Path) -> None:
    # The path was dropped and the part became a bare <image>.
    parts = [{"type": "image", "image": "imgs/0.png"}, {"type": "text", "text": "a"}]
    rows = [{"prompt": [{"role": "user", "content": parts}], "images": []}]
    with pytest.raises(HfsdkError) as info:
        load_verl_parquet(_write(tmp_path / "p.parquet", rows))
    message = str(info.value)
    assert "row 0: content part 0 carries its image inline (image='imgs/0.png')" in message
    assert "\n" not in message and "row's 'images' list" in message


def test_a_base64_data_uri_decodes_and_errors_quote_paths_shortly(tmp_path: Path) -> None:
    # A data: URI was read as a file path: the error line quoted all of it (~263 KB).
    import base64

    png = png_bytes(noise_image(0))
    uri = "data:image/png;base64," + base64.b64encode(png).decode()
    image = decode_image(uri, "row 0, image 0", base=tmp_path)
    assert image.size == decode_image(png, "row 0, image 0").size
    with pytest.raises(HfsdkError) as info:
        decode_image("data:image/png;base64,!!!not base64", "row 0, image 0")
    assert str(info.value).startswith("row 0, image 0 is a data: URI whose base64 does not decode")
    long_path = str(tmp_path / ("x" * 5000))
    with pytest.raises(HfsdkError) as info:
        decode_image(long_path, "row 0, image 0")
    assert len(str(info.value)) < 600 and "…" in str(info.value)


def _black_square_on_transparent(mode: str):  # type: ignore[no-untyped-def]
    """A 16x16 image in ``mode``: a black 8x8 square on a transparent background whose hidden
    colour is black too (as drawing tools save it)."""
    from PIL import Image

    image = Image.new("RGBA", (16, 16), (0, 0, 0, 0))
    image.paste((0, 0, 0, 255), (4, 4, 12, 12))
    if mode == "LA":
        return image.convert("LA")
    if mode == "P":
        palette = Image.new("P", (16, 16), 0)  # index 0 transparent black, index 1 opaque black
        palette.putpalette([0, 0, 0, 0, 0, 0] + [0] * (256 * 3 - 6))
        palette.paste(1, (4, 4, 12, 12))
        palette.info["transparency"] = 0
        return palette
    return image


@pytest.mark.parametrize("mode", ["RGBA", "LA", "P"])
def test_transparent_pixels_decode_as_white(mode: str) -> None:
    # convert("RGB") dropped the alpha: the hidden black showed and the image was all black.
    image = _black_square_on_transparent(mode)
    for item in (png_bytes(image), image):
        decoded = decode_image(item, "row 0, image 0")
        assert decoded.mode == "RGB"
        assert decoded.getpixel((0, 0)) == (255, 255, 255)
        assert decoded.getpixel((8, 8)) == (0, 0, 0)


def test_base64_text_under_bytes_decodes(tmp_path: Path) -> None:
    # JSON cannot hold raw bytes: {"bytes": "<base64>"} was opened as a path ("no such file").
    import base64

    png = png_bytes(noise_image(0))
    text = base64.b64encode(png).decode()
    size = decode_image(png, "row 0, image 0").size
    assert decode_image({"bytes": text, "path": None}, "row 0, image 0", base=tmp_path).size == size
    wrapped = base64.encodebytes(png).decode()  # line-wrapped every 76 characters
    assert decode_image({"bytes": wrapped}, "row 0, image 0").size == size
    with pytest.raises(HfsdkError) as info:
        decode_image({"bytes": "imgs/0.png", "path": None}, "row 0, image 0")
    message = str(info.value)
    assert message.startswith("row 0, image 0 has 'bytes' holding text that is not base64")
    assert "\n" not in message and "'path'" in message and "data:" in message


def test_a_line_wrapped_data_uri_decodes() -> None:
    # b64decode(validate=True) refused the newlines base64.encodebytes and MIME tools write.
    import base64

    png = png_bytes(noise_image(0))
    uri = "data:image/png;base64," + base64.encodebytes(png).decode()
    assert decode_image(uri, "row 0, image 0").size == decode_image(png, "row 0, image 0").size
