"""Weight fingerprints: exact, order-independent, and sensitive to any one changed element."""

from __future__ import annotations

import pytest
import torch

from hfsdk.core import weight_check
from hfsdk.core.weight_check import check_version, compare_manifest, fingerprint, manifest


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
def test_one_changed_element_changes_the_fingerprint(dtype: torch.dtype) -> None:
    weight = torch.randn(37, 53, generator=torch.Generator().manual_seed(0)).to(dtype)
    before = fingerprint(weight)
    assert fingerprint(weight.clone()) == before
    for row, col in ((0, 0), (18, 26), (36, 52), (5, 7)):  # sampled positions and others
        changed = weight.clone()
        changed[row, col] = torch.nextafter(changed[row, col].float(), torch.tensor(9.0)).to(dtype)
        if torch.equal(changed, weight):  # the next float rounds back in a narrow dtype
            changed[row, col] += 1
        assert fingerprint(changed) != before, (row, col)


def test_the_fingerprint_does_not_depend_on_layout_or_chunking(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    weight = torch.randn(64, 48, generator=torch.Generator().manual_seed(1))
    transposed = weight.t().contiguous().t()  # same values, column-major storage
    assert fingerprint(transposed) == fingerprint(weight)
    monkeypatch.setattr(weight_check, "_CHUNK", 100)  # many int64 passes, same exact sum
    assert fingerprint(weight) == fingerprint(transposed)


def test_the_comparison_names_dropped_and_changed_tensors() -> None:
    weights = {f"w{i}": torch.full((3,), float(i)) for i in range(4)}
    sent = manifest(weights.items())
    assert compare_manifest(sent, manifest(weights.items())) is None
    held = manifest((n, t) for n, t in weights.items() if n != "w2")
    assert compare_manifest(sent, held) == "1 tensor(s) sent but never loaded (first: 'w2')"
    old = dict(weights, w1=torch.zeros(3), w3=torch.zeros(3))
    assert compare_manifest(sent, manifest(old.items())) == (
        "2 of 4 tensor(s) differ from what was sent (first: 'w1')"
    )


def test_a_version_behind_the_synced_one_is_a_skipped_sync() -> None:
    assert check_version(3, 3, "the replicas") is None
    line = check_version(2, 3, "the replicas")
    assert line is not None and "version 2 where version 3" in line and "skipped" in line
