"""The image-token invariant: good batches pass, a broken row is named in one line."""

from __future__ import annotations

import pytest
import torch

from hfsdk import HfsdkError
from hfsdk_vision.invariant import check_image_tokens, features_per_image

IMG = 9  # the image pad token id in these hand-made rows


def _batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    # row 0: one 4x4 image (4 features); row 1: a 4x4 and a 4x8 image (4 + 8); row 2: none
    ids = torch.tensor(
        [
            [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, IMG, IMG, IMG, IMG, 2, 5, 6],
            [1, *[IMG] * 4, 2, 1, *[IMG] * 8, 2, 5, 6],
            [0] * 15 + [5, 6, 7],
        ]
    )
    mask = (ids != 0).long()
    grids = torch.tensor([[1, 4, 4], [1, 4, 4], [1, 4, 8]])
    per_row = torch.tensor([1, 2, 0])
    return ids, mask, grids, per_row


def test_features_per_image_follow_the_grid_and_merge_size() -> None:
    assert features_per_image(torch.tensor([[1, 4, 4], [1, 4, 8], [2, 6, 6]]), 2) == [4, 8, 18]


def test_a_consistent_batch_passes() -> None:
    ids, mask, grids, per_row = _batch()
    check_image_tokens(ids, grids, per_row, image_token_id=IMG, merge_size=2, attention_mask=mask)


def test_a_truncated_image_span_names_its_row() -> None:
    ids, _, grids, per_row = _batch()
    ids[1, 10] = 5  # one of row 1's image tokens lost (a cut or re-tokenised prompt)
    with pytest.raises(HfsdkError) as err:
        check_image_tokens(ids, grids, per_row, image_token_id=IMG, merge_size=2)
    message = str(err.value)
    assert message.startswith("row 1: 11 image tokens in the sequence but its 2 image(s) give 12")
    assert "\n" not in message


def test_drift_that_cancels_across_rows_is_still_caught() -> None:
    # Row 0 loses a token and row 1 gains one: the batch totals agree (transformers' own check
    # passes and shifts features between rows), the per-row check does not.
    ids, _, grids, per_row = _batch()
    ids[0, 11] = 5
    ids[1, 17] = IMG
    assert int((ids == IMG).sum()) == int(torch.tensor(features_per_image(grids, 2)).sum())
    with pytest.raises(HfsdkError, match=r"^row 0: 3 image tokens"):
        check_image_tokens(ids, grids, per_row, image_token_id=IMG, merge_size=2)


def test_changed_images_name_the_row() -> None:
    ids, _, grids, per_row = _batch()
    grids[0] = torch.tensor([1, 8, 8])  # the row's image was resized after tokenisation
    with pytest.raises(HfsdkError, match=r"^row 0: 4 image tokens .* give 16 vision features"):
        check_image_tokens(ids, grids, per_row, image_token_id=IMG, merge_size=2)


def test_masked_image_tokens_do_not_count() -> None:
    ids, mask, grids, per_row = _batch()
    mask[0, 12] = 0
    with pytest.raises(HfsdkError, match=r"^row 0: 3 image tokens"):
        check_image_tokens(
            ids, grids, per_row, image_token_id=IMG, merge_size=2, attention_mask=mask
        )


def test_images_and_grids_out_of_step_are_refused() -> None:
    ids, _, grids, per_row = _batch()
    with pytest.raises(HfsdkError, match=r"hold 3 images .* describes 2"):
        check_image_tokens(ids, grids[:2], per_row, image_token_id=IMG, merge_size=2)
    with pytest.raises(HfsdkError, match="2 entries for 3 rows"):
        check_image_tokens(ids, grids, per_row[:2], image_token_id=IMG, merge_size=2)
