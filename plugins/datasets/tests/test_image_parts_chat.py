"""TRL's conversational content parts: image parts become ``<image>``, the parts one string."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfsdk import DataConfig, HfsdkError
from hfsdk_datasets.chat import check_messages
from hfsdk_datasets.prompt_dataset import PromptLoader, load_prompt_dataset

PARTS = [{"type": "image"}, {"type": "text", "text": "add one"}]


def test_content_parts_render_as_placeholders_and_text() -> None:
    assert check_messages([{"role": "user", "content": PARTS}], "row 0") == [
        {"role": "user", "content": "<image> add one"}
    ]
    # Parquet gives every part every key of the column (an image part's text is None).
    read_back = [{"type": "image", "text": None}, {"type": "text", "text": "two"}]
    assert check_messages([{"role": "user", "content": read_back}], "row 0")[0]["content"] == (
        "<image> two"
    )


def test_a_part_that_has_no_rendering_is_one_line() -> None:
    parts = [{"type": "image_url", "image_url": "http://x/y.png"}]
    with pytest.raises(HfsdkError, match=r"^row 3: message 0 \(user\): content part 0 is") as info:
        check_messages([{"role": "user", "content": parts}], "row 3")
    message = str(info.value)
    assert "\n" not in message and "[{'type': 'image'}, {'type': 'text', 'text': '...'}]" in message


def test_trls_image_layout_loads_through_the_prompt_loader(tokenizer, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import datasets

    rows = [
        {"prompt": [{"role": "user", "content": PARTS}], "images": [b"png"]},
        {"prompt": [{"role": "user", "content": [{"type": "text", "text": "two"}]}], "images": []},
    ]
    path = tmp_path / "trl.parquet"
    datasets.Dataset.from_list(rows).to_parquet(str(path))
    dataset = load_prompt_dataset([str(path)], "prompt")
    config = DataConfig(batch_size=2, shuffle=False, apply_chat_template=False)
    batch = PromptLoader(dataset, tokenizer, config, seed=0).next_batch()
    assert list(batch["rendered_prompt"]) == ["<image> add one", "two"]


@pytest.mark.parametrize("key", ["image", "url", "path"])
def test_an_image_part_that_carries_its_image_inline_is_refused(key: str) -> None:
    # The path was dropped and the part became a bare <image>: a run trained on text alone.
    parts = [{"type": "image", "text": None, key: "imgs/0.png"}, {"type": "text", "text": "a"}]
    with pytest.raises(HfsdkError) as info:
        check_messages([{"role": "user", "content": parts}], "f.jsonl: row 2")
    message = str(info.value)
    assert message.startswith(
        f"f.jsonl: row 2: message 0 (user): content part 0 carries its image inline "
        f"({key}='imgs/0.png')"
    )
    assert "\n" not in message and "row's 'images' list" in message


def test_an_image_url_part_is_a_short_line_naming_the_images_column() -> None:
    # The whole part was quoted: a base64 data: URL made a 361 KB one-line error.
    url = "data:image/png;base64," + "A" * 400_000
    parts = [{"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": "a"}]
    with pytest.raises(HfsdkError) as info:
        check_messages([{"role": "user", "content": parts}], "row 3")
    message = str(info.value)
    assert "\n" not in message and len(message) < 500 and "…" in message
    assert "image_url" in message and "{'type': 'image'}" in message and "'images'" in message
