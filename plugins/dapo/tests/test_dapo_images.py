"""Dynamic sampling and image prompts: refused before the run; rounds that cannot be joined
are one line naming the switch, not a tensor-shape error."""

from __future__ import annotations

import types
from typing import Any

import pytest
import torch

from hfsdk import Batch, HfsdkError, get_registry
from hfsdk_dapo.dapo_algorithm import _concat_rounds
from hfsdk_dapo.preflight import NAME, dynamic_sampling_check


def _run(dynamic_sampling: bool, images: list[Any], algo: str = "dapo") -> tuple[Any, Any, Any]:
    config = types.SimpleNamespace(
        algorithm=types.SimpleNamespace(dynamic_sampling=dynamic_sampling)
    )
    spec = get_registry("algorithms")[algo].impl
    rows = [{"uid": str(i), "images": value} for i, value in enumerate(images)]
    prepared = types.SimpleNamespace(
        loader=types.SimpleNamespace(rows=rows), val_loader=None, row_columns=("images",)
    )
    return config, spec, prepared


def test_dynamic_sampling_with_image_rows_is_refused_before_the_run() -> None:
    # Rounds with images of different sizes failed at step 3 concatenating pixel_values.
    assert NAME in get_registry("preflight_checks")
    with pytest.raises(HfsdkError, match=r"^algorithm\.dynamic_sampling=true with image prompts"):
        dynamic_sampling_check(*_run(True, [[], [b"png"]]))


@pytest.mark.parametrize(("dynamic_sampling", "images"), [(False, [[b"png"]]), (True, [[], None])])
def test_no_refusal_without_dynamic_sampling_or_images(
    dynamic_sampling: bool, images: list[Any]
) -> None:
    assert dynamic_sampling_check(*_run(dynamic_sampling, images)) is None


def test_other_algorithms_are_not_this_checks_business() -> None:
    if "grpo" not in get_registry("algorithms"):
        pytest.skip("grpo is not installed")
    assert dynamic_sampling_check(*_run(True, [[b"png"]], algo="grpo")) is None


def _round(patches: int) -> Batch:
    ids = torch.ones(2, 3, dtype=torch.long)
    return Batch.from_dict(
        tensors={"input_ids": ids, "pixel_values": torch.zeros(2, patches, 4)},
        non_tensors={"uid": ["a", "b"]},
    )


def test_rounds_of_different_image_widths_are_one_line() -> None:
    # Images a tool drew differ between rounds: name dynamic sampling, not tensor padding.
    with pytest.raises(HfsdkError, match=r"'pixel_values' columns have different per-row shapes"):
        _concat_rounds([_round(8), _round(4)])
    assert len(_concat_rounds([_round(4), _round(4)])) == 4
