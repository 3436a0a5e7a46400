"""``hfsdk data inspect`` on image prompts: image and image-token counts, broken images named."""

from __future__ import annotations

from pathlib import Path

import pytest

from hfsdk.core.cli.main import main
from hfsdk_vision.shapes import shapes_rows, write_parquet


def _hfsdk(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(list(args))
    out, err = capsys.readouterr()
    return int(info.value.code or 0), out, err


def test_inspect_counts_images_and_their_tokens(
    tmp_path: Path, vlm_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = shapes_rows(3, seed=0)
    text = [{"role": "user", "content": "what colour is the square ?"}]
    rows.append({"prompt": text, "images": [], "answer": "red"})
    data = write_parquet(rows, tmp_path / "train.parquet")
    code, out, _ = _hfsdk(
        capsys, "data", "inspect", str(data), "--set", f"actor.model_path={vlm_dir}"
    )
    assert code == 0
    assert "images:           3 in 3 of 4 rows (all decode)" in out
    # A 56 px image: a 4×4 patch grid merged 2×2 is 4 tokens; 7 text tokens ("what colour is
    # the largest shape ?") + the two span markers + 4 image tokens in place of '<image>' = 13.
    assert "image tokens:     first image prompt 4 (4 per image), 13 tokens in all" in out


def test_a_text_dataset_gets_no_image_lines(
    tmp_path: Path, vlm_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_parquet([{"prompt": "square", "answer": "red"}], tmp_path / "text.parquet")
    code, out, _ = _hfsdk(
        capsys, "data", "inspect", str(data), "--set", f"actor.model_path={vlm_dir}"
    )
    assert code == 0 and "image" not in out


def test_an_image_that_does_not_decode_is_one_line(
    tmp_path: Path, vlm_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = shapes_rows(3, seed=0)
    rows[1]["images"] = [{"bytes": b"not an image", "path": None}]
    data = write_parquet(rows, tmp_path / "bad.parquet")
    code, _, err = _hfsdk(
        capsys, "data", "inspect", str(data), "--set", f"actor.model_path={vlm_dir}"
    )
    assert code == 2
    assert err.startswith("Error: row 1, image 0 could not be decoded") and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_a_later_row_out_of_step_is_the_line_a_run_would_stop_with(
    tmp_path: Path, vlm_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = shapes_rows(3, seed=0)
    rows[2]["images"] = []  # its prompt keeps its '<image>'
    data = write_parquet(rows, tmp_path / "bad.parquet")
    code, _, err = _hfsdk(
        capsys, "data", "inspect", str(data), "--set", f"actor.model_path={vlm_dir}"
    )
    assert code == 2
    assert err.startswith("Error: row 2: the prompt has 1 '<image>' placeholders but the row has")


def test_relative_image_paths_resolve_from_the_data_files_folder(
    tmp_path: Path,
    vlm_dir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rows = shapes_rows(2, seed=0)
    (tmp_path / "data" / "img").mkdir(parents=True)
    for i, row in enumerate(rows):
        (tmp_path / "data" / "img" / f"{i}.png").write_bytes(row["images"][0]["bytes"])
        row["images"] = [{"bytes": None, "path": f"img/{i}.png"}]  # the rollout test: strings
    data = write_parquet(rows, tmp_path / "data" / "train.parquet")
    monkeypatch.chdir(tmp_path)  # not the file's folder: before, 'img/0.png' was looked up here
    code, out, err = _hfsdk(
        capsys, "data", "inspect", str(data), "--set", f"actor.model_path={vlm_dir}"
    )
    assert (code, err) == (0, "")
    assert "images:           2 in 2 of 2 rows (all decode)" in out


def test_trls_single_image_column_is_refused_as_a_run_refuses_it(
    tmp_path: Path, vlm_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = shapes_rows(2, seed=0)
    for row in rows:
        row["image"] = row.pop("images")[0]  # TRL's one image per row
    data = write_parquet(rows, tmp_path / "single.parquet")
    code, _, err = _hfsdk(
        capsys, "data", "inspect", str(data), "--set", f"actor.model_path={vlm_dir}"
    )
    assert code == 2
    assert err.startswith("Error: the prompts carry images in TRL's single 'image' column")
    assert len(err.strip().splitlines()) == 1


def test_an_images_value_that_is_not_a_list_is_one_line(
    tmp_path: Path, vlm_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 'img/0.png' was read as 9 images (its characters): a placeholder count mismatch.
    rows = shapes_rows(2, seed=0)
    for row in rows:
        row["images"] = "img/0.png"
    data = write_parquet(rows, tmp_path / "str.parquet")
    code, _, err = _hfsdk(
        capsys, "data", "inspect", str(data), "--set", f"actor.model_path={vlm_dir}"
    )
    assert code == 2
    assert err.strip() == (
        "Error: row 0: images must be a list of images per row (got a str); wrap it in a list"
    )
