"""Weight fingerprints: exact, order-independent, and sensitive to any one changed element."""

from __future__ import annotations

import pytest
import torch

from hfsdk_backend_common import compare_manifest, fingerprint, manifest, weight_check


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


def _factors(out: int, inp: int, rank: int, seed: int) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(seed)
    base = torch.randn(out, inp, generator=generator) * 0.05
    down = torch.randn(rank, inp, generator=generator) * 0.1
    up = torch.randn(out, rank, generator=generator) * 0.5
    return base, down, up


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", [(48, 32), (32, 32), (96, 200)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_merge_passes_its_probe_in_every_orientation_and_dtype(
    dtype: torch.dtype, shape: tuple[int, int], seed: int
) -> None:
    """The merge as the actor computes it (float32, cast to the sent dtype), stored (out, in)
    or transposed (in, out) as a Conv1D weight: the factors' probe accepts it, with the
    receiver holding it in the sent dtype or in float32."""
    from hfsdk_backend_common import check_probe, low_rank_probe

    base, down, up = _factors(*shape, rank=4, seed=seed)
    merged = (base + 2.0 * (up @ down)).to(dtype)
    probe = low_rank_probe(base, down, up, 2.0, dtype=dtype)
    assert check_probe("w", merged, probe) is None
    assert check_probe("w", merged.float(), probe) is None
    stored = base.T.contiguous()  # a Conv1D's (in, out) weight; the update is transposed
    merged_t = (stored + 2.0 * (up @ down).T).to(dtype)
    assert check_probe("w", merged_t, low_rank_probe(stored, down, up, 2.0,
                                                     transposed=True, dtype=dtype)) is None  # fmt: skip


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_wrong_merge_fails_its_probe_with_one_line(seed: int) -> None:
    """What a merge gets wrong: the update left out, scaled wrong, not transposed (a square
    Conv1D loads anyway), or another module's factors; and a one-ulp change stays within
    the tolerance (the exact read-back, not the probe, catches those)."""
    from hfsdk_backend_common import ProbeCheck, check_probe, low_rank_probe

    base, down, up = _factors(32, 32, rank=4, seed=seed)
    other_down, other_up = _factors(32, 32, rank=4, seed=seed + 10)[1:]
    probe = low_rank_probe(base, down, up, 2.0, dtype=torch.float32)
    wrong = {
        "no update": base,
        "scale 1": base + up @ down,
        "untransposed": base + 2.0 * (up @ down).T,
        "other factors": base + 2.0 * (other_up @ other_down),
    }
    for what, weight in wrong.items():
        line = check_probe("layer.weight", weight, probe)
        assert line is not None and "\n" not in line, what
        assert line.startswith("'layer.weight' is not the merge of its base weight"), line
    nudged = base + 2.0 * (up @ down)
    nudged[3, 3] = torch.nextafter(nudged[3, 3], torch.tensor(9.0))
    assert check_probe("layer.weight", nudged, probe) is None
    check = ProbeCheck(lambda: {"a": probe, "b": probe})
    check.observe("a", base + 2.0 * (up @ down))
    check.observe("b", base)
    check.observe("not derived", base)  # no probe: nothing to check
    assert check.checked == 2
    assert check.problem() is not None and check.problem().startswith(
        "1 of 2 merged weight(s) wrong: 'b' is not the merge"
    )


def test_a_probed_merge_that_never_arrives_is_named() -> None:
    """The sender probed two merged weights and the receiver got one: the other (which the
    receiver still holds from before) fails the check, though the one it got is right."""
    from hfsdk_backend_common import ProbeCheck, low_rank_probe

    base, down, up = _factors(32, 32, rank=4, seed=0)
    probe = low_rank_probe(base, down, up, 2.0, dtype=torch.float32)
    check = ProbeCheck(lambda: {"a": probe, "b": probe})
    check.observe("a", base + 2.0 * (up @ down))
    assert check.checked == 1
    assert check.problem() == "1 of 2 merged weight(s) never arrived (first: 'b')"


def test_the_probe_runs_on_the_weights_device() -> None:
    """A weight on another device than the CPU (``meta`` stands in for CUDA: it refuses to
    mix with CPU tensors as CUDA does): the probe vector goes to the weight's device, with
    the same values as on the CPU, and a probe computed on one device checks a weight held
    on another."""
    from hfsdk_backend_common import check_probe, low_rank_probe, probe_input

    meta = torch.device("meta")
    base, down, up = (t.to(meta) for t in _factors(8, 16, rank=2, seed=0))
    expected, tolerance, _ = low_rank_probe(base, down, up, 2.0, dtype=torch.float32)
    assert expected.device == meta and tolerance.device == meta and expected.shape == (8,)
    cpu_probe = low_rank_probe(*_factors(8, 16, rank=2, seed=0), 2.0, dtype=torch.float32)
    with pytest.raises(RuntimeError, match="item"):  # only reading the verdict needs data
        check_probe("w", base, cpu_probe)
    assert probe_input(16, "meta").device.type == "meta"
    assert torch.equal(probe_input(16, torch.device("cpu")), probe_input(16))
