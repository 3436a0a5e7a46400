"""Tests for the batch protocol (hfsdk.core.batch.Batch)."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import hfsdk
from hfsdk.core.batch import Batch
from hfsdk.core.errors import HfsdkError


def make_batch(length: int = 5) -> Batch:
    """A batch whose rows are distinguishable in every column (row i holds i-derived values)."""
    rows = torch.arange(length)
    return Batch.from_dict(
        tensors={
            "ids": rows.repeat_interleave(3).reshape(length, 3) * 10 + torch.arange(3),
            "mask": rows % 2 == 0,
            "logp": (rows.to(torch.float32) / 4).to(torch.bfloat16),
        },
        non_tensors={
            "prompt": [f"p{i}" for i in range(length)],
            "score": [float(i) * 0.5 for i in range(length)],
            "extra": [{"row": i, "tags": [i, i + 1]} for i in range(length)],
        },
        meta={"temperature": 0.7},
    )


def row_ids(batch: Batch) -> list[int]:
    """Which original rows a derived batch holds (ids[:, 0] is 10 * row)."""
    return (batch["ids"][:, 0] // 10).tolist()


def assert_same(actual: Batch, expected: Batch) -> None:
    """Exact equality of lengths, keys, dtypes, shapes, values and meta."""
    assert len(actual) == len(expected)
    assert actual.tensor_keys == expected.tensor_keys
    assert actual.non_tensor_keys == expected.non_tensor_keys
    for key in expected.tensor_keys:
        assert actual[key].dtype == expected[key].dtype, key
        assert actual[key].shape == expected[key].shape, key
        assert torch.equal(actual[key], expected[key]), key
    for key in expected.non_tensor_keys:
        assert actual[key].dtype == expected[key].dtype, key
        assert actual[key].shape == expected[key].shape, key
        assert actual[key].tolist() == expected[key].tolist(), key
    assert actual.meta == expected.meta


# ---------------------------------------------------------------------- construction


def test_public_name_is_lazily_exported() -> None:
    assert hfsdk.Batch is Batch


def test_from_dict_infers_length_and_keeps_numeric_arrays_numeric() -> None:
    batch = make_batch(4)
    assert len(batch) == 4
    assert batch.batch_size == 4
    assert batch.tensors.batch_size == torch.Size([4])
    assert batch["score"].dtype == np.float64
    assert batch["prompt"].dtype == object
    assert batch["extra"].dtype == object
    assert batch["extra"][2] == {"row": 2, "tags": [2, 3]}


def test_equal_length_lists_stay_one_object_per_sample() -> None:
    batch = Batch.from_dict(non_tensors={"pairs": [[1, 2], [3, 4], [5, 6]]})
    assert batch["pairs"].shape == (3,)
    assert batch["pairs"][1] == [3, 4]


def test_fixed_width_string_arrays_become_object_arrays() -> None:
    # A "<U2" array would silently truncate longer strings on concat.
    batch = Batch.from_dict(non_tensors={"s": np.array(["ab", "cd"])})
    longer = Batch.from_dict(non_tensors={"s": ["a much longer string", "x"]})
    assert batch["s"].dtype == object
    assert Batch.concat([batch, longer])["s"].tolist() == ["ab", "cd", "a much longer string", "x"]


def test_multi_dimensional_numeric_array_is_kept() -> None:
    batch = Batch.from_dict(non_tensors={"grid": np.arange(12).reshape(4, 3)})
    assert len(batch) == 4
    assert batch["grid"].shape == (4, 3)
    assert batch.index([3])["grid"].tolist() == [[9, 10, 11]]


def test_tensors_are_a_plain_typed_mapping_without_tensordict() -> None:
    import subprocess
    import sys

    from hfsdk.core.batch_columns import TensorColumns

    x = torch.arange(3)
    batch = Batch({"x": x}, {"s": ["a", "b", "c"]}, {"k": 1})
    assert isinstance(batch.tensors, TensorColumns) and batch.tensors["x"] is x
    assert list(batch.tensors) == ["x"]  # a mapping iterates its names (a TensorDict its rows)
    assert batch.tensors.batch_size == torch.Size([3]) and batch.tensors.device is None
    assert len(batch) == 3 and batch.meta == {"k": 1}
    assert batch.to("cpu").tensors.device == torch.device("cpu")
    code = (
        "import sys, torch; from hfsdk.core.batch import Batch; "
        "b = Batch.concat(Batch({'x': torch.ones(4, 2)}).split(2)); "
        "print(len(b), 'tensordict' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["4", "False"]


def test_empty_batch_has_length_zero_unless_given() -> None:
    assert len(Batch()) == 0
    assert Batch().keys() == []
    sized = Batch(batch_size=7)
    assert len(sized) == 7
    assert sized.tensors.batch_size == torch.Size([7])


def test_length_mismatch_names_key_and_both_lengths() -> None:
    with pytest.raises(
        HfsdkError, match=r"'labels' has 2 rows but the batch has 3 \(set by tensor 'x'\)"
    ):
        Batch.from_dict({"x": torch.zeros(3)}, {"labels": ["a", "b"]})
    with pytest.raises(HfsdkError, match=r"'y' has 4 rows but the batch has 3.*meta"):
        Batch.from_dict({"x": torch.zeros(3), "y": torch.zeros(4, 2)})
    with pytest.raises(
        HfsdkError, match=r"'x' has 3 rows but the batch has 5 \(set by batch_size=5\)"
    ):
        Batch.from_dict({"x": torch.zeros(3)}, batch_size=5)


@pytest.mark.parametrize(
    ("tensors", "non_tensors", "message"),
    [
        ({"x": torch.tensor(1.0)}, None, r"'x' is a scalar.*meta"),
        ({"x": [1, 2]}, None, r"'x' is a list, not a torch.Tensor"),
        (None, {"s": torch.zeros(2)}, r"'s' is a torch.Tensor; put tensors in tensors"),
        (None, {"s": "abc"}, r"'s' is a str; per-sample values must be a list"),
        (None, {"s": np.float32(1.0)}, r"'s' is a float32"),
        (None, {"s": np.array(3)}, r"'s' is a 0-d array"),
        (
            {"k": torch.zeros(2)},
            {"k": [1, 2]},
            r"'k' is given both as a tensor and as a non-tensor",
        ),
        ({1: torch.zeros(2)}, None, r"keys must be strings"),
    ],
)
def test_bad_construction_input(tensors: Any, non_tensors: Any, message: str) -> None:
    with pytest.raises(HfsdkError, match=message):
        Batch.from_dict(tensors, non_tensors)


def test_a_given_batch_size_must_fit_the_tensors() -> None:
    with pytest.raises(HfsdkError, match=r"3"):
        Batch({"x": torch.zeros(2)}, batch_size=3)


# ---------------------------------------------------------------------- container protocol


def test_keys_contains_and_getitem() -> None:
    batch = make_batch(3)
    assert batch.tensor_keys == ["ids", "mask", "logp"]
    assert batch.non_tensor_keys == ["prompt", "score", "extra"]
    assert batch.keys() == ["ids", "mask", "logp", "prompt", "score", "extra"]
    assert "ids" in batch and "prompt" in batch
    assert "temperature" not in batch  # meta is not a per-sample key
    assert 3 not in batch
    assert batch["ids"].tolist() == [[0, 1, 2], [10, 11, 12], [20, 21, 22]]
    assert batch["prompt"].tolist() == ["p0", "p1", "p2"]


def test_missing_key_lists_available_keys() -> None:
    with pytest.raises(KeyError, match=r"no key 'nope'; its keys are \['ids'"):
        make_batch(2)["nope"]
    with pytest.raises(TypeError, match=r"use batch.index"):
        make_batch(2)[0]  # type: ignore[index]


def test_setitem_adds_length_checked_columns() -> None:
    batch = make_batch(3)
    batch["values"] = torch.tensor([1.0, 2.0, 3.0])
    batch["names"] = ["a", "b", "c"]
    assert batch["values"].tolist() == [1.0, 2.0, 3.0]
    assert batch["names"].dtype == object
    with pytest.raises(HfsdkError, match=r"'bad' has 2 rows but the batch has 3"):
        batch["bad"] = torch.zeros(2)
    with pytest.raises(HfsdkError, match=r"'bad' has 4 rows but the batch has 3"):
        batch["bad"] = [1, 2, 3, 4]
    assert "bad" not in batch


def test_setitem_replacing_a_key_with_the_other_kind_moves_it() -> None:
    batch = make_batch(2)
    batch["prompt"] = torch.tensor([7, 8])
    assert "prompt" in batch.tensor_keys and "prompt" not in batch.non_tensor_keys
    batch["ids"] = ["x", "y"]
    assert "ids" in batch.non_tensor_keys and "ids" not in batch.tensor_keys


def test_setitem_on_empty_batch_takes_the_first_length() -> None:
    batch = Batch()
    batch["x"] = torch.arange(4)
    assert len(batch) == 4
    with pytest.raises(HfsdkError, match=r"'y' has 4 rows but the batch has 3"):
        Batch(batch_size=3)["y"] = torch.arange(4)


def test_delitem_and_iteration() -> None:
    batch = make_batch(2)
    del batch["ids"]
    del batch["prompt"]
    assert batch.keys() == ["mask", "logp", "score", "extra"]
    with pytest.raises(KeyError):
        del batch["ids"]
    with pytest.raises(TypeError, match=r"not iterable; use batch.keys\(\)"):
        iter(batch)


def test_repr_shows_length_keys_and_shapes() -> None:
    text = repr(make_batch(4))
    assert text.startswith("Batch(len=4,")
    assert "ids: (4, 3) int64" in text
    assert "logp: (4,) bfloat16" in text
    assert "prompt: (4,) object" in text
    assert "meta_keys=['temperature']" in text


# ---------------------------------------------------------------------- select / pop / union


def test_select_keeps_named_keys_and_none_means_all() -> None:
    batch = make_batch(3)
    picked = batch.select(tensor_keys=["ids"], non_tensor_keys=[], meta_keys=None)
    assert picked.keys() == ["ids"]
    assert picked.meta == {"temperature": 0.7}
    assert len(picked) == 3
    assert picked["ids"].data_ptr() == batch["ids"].data_ptr()  # no copy
    assert batch.select().keys() == batch.keys()
    with pytest.raises(HfsdkError, match=r"no tensor key\(s\) \['nope'\]; its tensor keys are"):
        batch.select(tensor_keys=["nope"])
    with pytest.raises(HfsdkError, match=r"no meta key\(s\) \['x'\]"):
        batch.select(meta_keys=["x"])


def test_pop_removes_keys_from_the_source() -> None:
    batch = make_batch(3)
    popped = batch.pop(tensor_keys=["mask"], non_tensor_keys=["prompt"], meta_keys=["temperature"])
    assert popped.keys() == ["mask", "prompt"]
    assert popped.meta == {"temperature": 0.7}
    assert len(popped) == 3
    assert batch.keys() == ["ids", "logp", "score", "extra"]
    assert batch.meta == {}
    with pytest.raises(HfsdkError, match="no tensor key"):
        batch.pop(tensor_keys=["mask"])


def test_union_merges_and_accepts_equal_shared_keys() -> None:
    batch = make_batch(3)
    left = batch.select(tensor_keys=["ids", "mask"], non_tensor_keys=["prompt"])
    right = batch.select(tensor_keys=["ids", "logp"], non_tensor_keys=["prompt", "extra"])
    right.meta["step"] = 4
    joined = left.union(right)
    assert joined.keys() == ["ids", "mask", "logp", "prompt", "extra"]
    assert joined.meta == {"temperature": 0.7, "step": 4}
    assert torch.equal(joined["logp"], batch["logp"])
    assert left.keys() == ["ids", "mask", "prompt"]  # inputs untouched


def test_union_conflicts_name_the_key() -> None:
    batch = make_batch(3)
    changed = batch.select(tensor_keys=["ids"], non_tensor_keys=[])
    changed["ids"] = changed["ids"] + 1
    with pytest.raises(HfsdkError, match=r"tensor 'ids' is in both batches with different values"):
        batch.union(changed)
    other_prompts = Batch.from_dict(non_tensors={"prompt": ["p0", "p1", "other"]})
    with pytest.raises(HfsdkError, match=r"non-tensor 'prompt' is in both batches"):
        batch.union(other_prompts)
    other_dtype = Batch.from_dict({"mask": batch["mask"].to(torch.int64)})
    with pytest.raises(HfsdkError, match=r"tensor 'mask' is in both batches"):
        batch.union(other_dtype)
    hot = Batch(batch_size=3, meta={"temperature": 1.0})
    with pytest.raises(HfsdkError, match=r"meta key 'temperature' differs"):
        batch.union(hot)
    kinds = Batch.from_dict({"prompt": torch.zeros(3)})
    with pytest.raises(HfsdkError, match=r"'prompt' is a non-tensor in the first batch"):
        batch.union(kinds)
    with pytest.raises(HfsdkError, match=r"'ids' is a tensor in the first batch"):
        batch.union(Batch.from_dict(non_tensors={"ids": [1, 2, 3]}))


def test_union_length_mismatch_and_meta_only_batch() -> None:
    batch = make_batch(3)
    with pytest.raises(HfsdkError, match=r"cannot union batches of length 3 and 2"):
        batch.union(make_batch(2))
    with_meta = batch.union(Batch(meta={"step": 1}))
    assert len(with_meta) == 3
    assert with_meta.meta == {"temperature": 0.7, "step": 1}
    assert len(Batch(meta={"step": 1}).union(batch)) == 3


# ---------------------------------------------------------------------- chunk / split / concat


def test_chunk_gives_equal_consecutive_views() -> None:
    batch = make_batch(6)
    parts = batch.chunk(3)
    assert [row_ids(part) for part in parts] == [[0, 1], [2, 3], [4, 5]]
    assert [part["prompt"].tolist() for part in parts] == [["p0", "p1"], ["p2", "p3"], ["p4", "p5"]]
    assert all(part.meta == {"temperature": 0.7} for part in parts)
    parts[1]["ids"][0, 0] = -1  # views share memory with the source
    assert batch["ids"][2, 0] == -1


def test_chunk_not_divisible_says_to_pad() -> None:
    with pytest.raises(
        HfsdkError, match=r"length 5 into 2 equal parts \(5 % 2 = 1\).*pad_to_divisor\(2\)"
    ):
        make_batch(5).chunk(2)
    with pytest.raises(HfsdkError, match=r"n must be a positive int, got 0"):
        make_batch(4).chunk(0)


def test_concat_of_chunks_equals_original() -> None:
    batch = make_batch(8)
    assert_same(Batch.concat(batch.chunk(4)), batch)
    assert_same(Batch.concat(batch.split(3)), batch)


def test_split_last_piece_may_be_shorter() -> None:
    pieces = make_batch(5).split(2)
    assert [row_ids(piece) for piece in pieces] == [[0, 1], [2, 3], [4]]
    assert make_batch(0).split(2) == []


def test_concat_errors() -> None:
    batch = make_batch(2)
    with pytest.raises(HfsdkError, match=r"at least one batch"):
        Batch.concat([])
    missing = batch.select(tensor_keys=["ids", "mask"])
    with pytest.raises(
        HfsdkError,
        match=r"batch 0 and batch 1 have different tensor keys \(only in batch 0: \['logp'\]",
    ):
        Batch.concat([batch, missing])
    wide = Batch.from_dict({"x": torch.zeros(2, 4)})
    narrow = Batch.from_dict({"x": torch.zeros(2, 3)})
    with pytest.raises(HfsdkError, match=r"tensor 'x': shapes \[\(2, 4\), \(2, 3\)\] differ"):
        Batch.concat([wide, narrow])
    as_half = Batch.from_dict({"x": torch.zeros(2, 4, dtype=torch.float16)})
    with pytest.raises(HfsdkError, match=r"tensor 'x': dtypes .* differ"):
        Batch.concat([wide, as_half])
    hot = make_batch(2)
    hot.meta["temperature"] = 1.0
    with pytest.raises(HfsdkError, match=r"concat: meta key 'temperature' differs"):
        Batch.concat([batch, hot])


def test_concat_merges_meta_keys() -> None:
    first, second = make_batch(2), make_batch(2)
    second.meta["step"] = 3
    joined = Batch.concat([first, second])
    assert joined.meta == {"temperature": 0.7, "step": 3}
    assert len(joined) == 4
    assert row_ids(joined) == [0, 1, 0, 1]


# ---------------------------------------------------------------------- repeat / index


def test_repeat_interleaved_and_tiled() -> None:
    batch = make_batch(3)
    interleaved = batch.repeat(2)
    assert row_ids(interleaved) == [0, 0, 1, 1, 2, 2]
    assert interleaved["prompt"].tolist() == ["p0", "p0", "p1", "p1", "p2", "p2"]
    assert interleaved["mask"].tolist() == [True, True, False, False, True, True]
    tiled = batch.repeat(2, interleave=False)
    assert row_ids(tiled) == [0, 1, 2, 0, 1, 2]
    assert tiled["score"].tolist() == [0.0, 0.5, 1.0, 0.0, 0.5, 1.0]
    assert tiled["logp"].dtype == torch.bfloat16
    with pytest.raises(HfsdkError, match=r"repeat: n must be a positive int"):
        batch.repeat(-1)


def test_index_by_list_tensor_array_mask_and_slice() -> None:
    batch = make_batch(5)
    assert row_ids(batch.index([4, 0, 0])) == [4, 0, 0]
    assert batch.index([4, 0])["prompt"].tolist() == ["p4", "p0"]
    assert row_ids(batch.index(torch.tensor([1, 3]))) == [1, 3]
    assert row_ids(batch.index(np.array([2]))) == [2]
    assert row_ids(batch.index([-1, -5])) == [4, 0]
    assert row_ids(batch.index(batch["mask"])) == [0, 2, 4]
    assert row_ids(batch.index(slice(1, 4))) == [1, 2, 3]
    assert row_ids(batch.index(slice(None, None, 2))) == [0, 2, 4]
    assert row_ids(batch.index(slice(None, None, -1))) == [4, 3, 2, 1, 0]
    assert row_ids(batch.index(range(3, 5))) == [3, 4]
    empty = batch.index([])
    assert len(empty) == 0 and empty["ids"].shape == (0, 3) and empty["prompt"].shape == (0,)


def test_index_copies_except_for_slices() -> None:
    batch = make_batch(3)
    batch.index([0])["ids"][0, 0] = -1
    assert batch["ids"][0, 0] == 0
    batch.index(slice(0, 1))["ids"][0, 0] = -1
    assert batch["ids"][0, 0] == -1


@pytest.mark.parametrize(
    ("idx", "message"),
    [
        ([5], r"row index 5 is out of range for a batch of length 5"),
        ([-6], r"row index -6 is out of range"),
        (2, r"single int 2; pass \[2\]"),
        ([0.5], r"integer row positions or a boolean mask"),
        ([True, False], r"mask has length 2 but the batch has 5 rows"),
        (torch.zeros(2, 2, dtype=torch.int64), r"1-D index"),
    ],
)
def test_index_errors(idx: Any, message: str) -> None:
    with pytest.raises(HfsdkError, match=message):
        make_batch(5).index(idx)


# ---------------------------------------------------------------------- padding


def test_pad_to_divisor_repeats_rows_from_the_start_and_unpad_undoes_it() -> None:
    batch = make_batch(5)
    padded, pad_size = batch.pad_to_divisor(4)
    assert pad_size == 3
    assert len(padded) == 8
    assert row_ids(padded) == [0, 1, 2, 3, 4, 0, 1, 2]
    assert padded["prompt"].tolist()[5:] == ["p0", "p1", "p2"]
    assert_same(padded.unpad(pad_size), batch)


def test_pad_wraps_when_divisor_exceeds_length() -> None:
    padded, pad_size = make_batch(2).pad_to_divisor(5)
    assert pad_size == 3
    assert row_ids(padded) == [0, 1, 0, 1, 0]


def test_pad_when_already_divisible_returns_pad_zero() -> None:
    batch = make_batch(6)
    padded, pad_size = batch.pad_to_divisor(3)
    assert pad_size == 0
    assert_same(padded, batch)
    assert_same(padded.unpad(0), batch)
    empty, empty_pad = make_batch(0).pad_to_divisor(4)
    assert empty_pad == 0 and len(empty) == 0


def test_pad_chunk_concat_unpad_round_trip() -> None:
    # The dispatch path: pad for 4 workers, chunk, (compute), concat, unpad.
    batch = make_batch(7)
    padded, pad_size = batch.pad_to_divisor(4)
    collected = Batch.concat(padded.chunk(4))
    assert_same(collected.unpad(pad_size), batch)


def test_unpad_rejects_bad_sizes() -> None:
    with pytest.raises(
        HfsdkError, match=r"pad_size must be an int between 0 and the batch length 3, got 4"
    ):
        make_batch(3).unpad(4)
    with pytest.raises(HfsdkError, match=r"got -1"):
        make_batch(3).unpad(-1)
    with pytest.raises(HfsdkError, match=r"divisor must be a positive int"):
        make_batch(3).pad_to_divisor(0)


# ---------------------------------------------------------------------- mini-batches and devices


def test_iter_minibatches_in_order() -> None:
    batches = list(make_batch(5).iter_minibatches(2))
    assert [row_ids(b) for b in batches] == [[0, 1], [2, 3], [4]]


def test_iter_minibatches_shuffled_is_seeded_and_covers_every_row_once() -> None:
    batch = make_batch(32)
    first = [row_ids(b) for b in batch.iter_minibatches(8, shuffle=True, seed=3)]
    again = [row_ids(b) for b in batch.iter_minibatches(8, shuffle=True, seed=3)]
    other = [row_ids(b) for b in batch.iter_minibatches(8, shuffle=True, seed=4)]
    assert first == again
    assert first != other
    flat = [row for piece in first for row in piece]
    assert sorted(flat) == list(range(32))
    expected = torch.randperm(32, generator=torch.Generator().manual_seed(3)).tolist()
    assert flat == expected
    # Non-tensor columns follow the same permutation.
    prompts = [p for b in batch.iter_minibatches(8, shuffle=True, seed=3) for p in b["prompt"]]
    assert prompts == [f"p{i}" for i in expected]


def test_iter_minibatches_validates_when_called() -> None:
    with pytest.raises(HfsdkError, match=r"size must be a positive int, got 0"):
        make_batch(3).iter_minibatches(0)


def test_to_moves_tensors_and_shares_the_rest() -> None:
    batch = make_batch(3)
    moved = batch.to("meta")
    assert all(moved[key].device.type == "meta" for key in moved.tensor_keys)
    assert moved["prompt"] is batch["prompt"]
    assert moved.meta == batch.meta and moved.meta is not batch.meta
    assert batch["ids"].device.type == "cpu"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_batch_round_trips_through_pickle_onto_the_cpu() -> None:
    batch = make_batch(4)
    on_gpu = batch.to("cuda")
    assert on_gpu["ids"].is_cuda
    assert row_ids(on_gpu.index([3, 1]).to("cpu")) == [3, 1]
    restored = pickle.loads(pickle.dumps(on_gpu))
    assert restored["ids"].device.type == "cpu"
    assert_same(restored, batch)


# ---------------------------------------------------------------------- pickling


@pytest.mark.parametrize("protocol", [4, 5])
def test_pickle_round_trip_is_exact(protocol: int) -> None:
    batch = make_batch(4)
    batch["half"] = torch.randn(4, 2, 3, generator=torch.Generator().manual_seed(0)).half()
    batch["big"] = torch.tensor([2**62, -(2**62), 1, 0], dtype=torch.int64)
    batch["transposed"] = torch.arange(12, dtype=torch.float64).reshape(3, 4).t()  # not contiguous
    batch["nothing"] = torch.zeros(4, 0)
    batch["bytes"] = torch.arange(4, dtype=torch.uint8)
    batch["counts"] = np.array([3, 1, 4, 1], dtype=np.int32)
    batch.meta["nested"] = {"list": [1, 2], "tensor": torch.ones(2)}
    restored = pickle.loads(pickle.dumps(batch, protocol=protocol))
    assert restored.meta["nested"]["list"] == [1, 2]
    assert torch.equal(restored.meta.pop("nested")["tensor"], torch.ones(2))
    batch.meta.pop("nested")
    assert_same(restored, batch)
    assert restored["big"].tolist() == [2**62, -(2**62), 1, 0]
    assert restored["counts"].dtype == np.int32
    assert restored["extra"][1] == {"row": 1, "tags": [1, 2]}
    restored["ids"][0, 0] = 99  # restored tensors own writable memory
    assert batch["ids"][0, 0] == 0


def test_pickle_sends_raw_byte_buffers_and_detaches() -> None:
    batch = Batch.from_dict({"w": torch.ones(3, 2, requires_grad=True)})
    state = batch.__getstate__()
    key, dtype, shape, buffer = state["tensors"][0]
    assert (key, dtype, shape) == ("w", "torch.float32", (3, 2))
    assert isinstance(buffer, np.ndarray) and buffer.dtype == np.uint8 and buffer.nbytes == 24
    restored = pickle.loads(pickle.dumps(batch))
    assert not restored["w"].requires_grad
    assert restored["w"].tolist() == [[1.0, 1.0]] * 3


def test_unpickling_a_read_only_buffer_copies_it() -> None:
    # Ray hands out read-only zero-copy buffers; the batch must still get writable tensors.
    state = Batch.from_dict({"x": torch.arange(4, dtype=torch.int32)}).__getstate__()
    key, dtype, shape, buffer = state["tensors"][0]
    buffer = buffer.copy()
    buffer.setflags(write=False)
    state["tensors"] = [(key, dtype, shape, buffer)]
    batch = Batch.__new__(Batch)
    batch.__setstate__(state)
    batch["x"][0] = 7
    assert batch["x"].tolist() == [7, 1, 2, 3]
    assert buffer[0] == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_unpickling_a_read_only_empty_buffer(dtype: torch.dtype) -> None:
    # A rank whose rows carry no images sends (rows, 16, 0) pixel values through Ray.
    state = Batch.from_dict({"x": torch.zeros(2, 16, 0, dtype=dtype)}).__getstate__()
    for _, _, _, buffer in state["tensors"]:
        buffer.setflags(write=False)
    batch = Batch.__new__(Batch)
    batch.__setstate__(state)
    assert batch["x"].shape == (2, 16, 0) and batch["x"].dtype == dtype


def test_unpickling_an_unknown_format_is_an_error() -> None:
    state = make_batch(1).__getstate__()
    state["format"] = 999
    with pytest.raises(HfsdkError, match=r"format 999; this hfsdk reads format 1"):
        Batch.__new__(Batch).__setstate__(state)


def test_pickled_size_is_close_to_the_raw_data_size() -> None:
    megabyte = 1024 * 1024
    batch = Batch.from_dict({"x": torch.zeros(megabyte // 4, dtype=torch.float32)})
    assert len(pickle.dumps(batch)) < 1.05 * megabyte
    assert len(pickle.dumps(batch, protocol=5)) < 1.05 * megabyte
    # A chunk is a view; only its own bytes are sent, not the whole underlying storage.
    quarter = batch.chunk(4)[1]
    assert len(pickle.dumps(quarter)) < 0.27 * megabyte


# ---------------------------------------------------------------------- properties


@st.composite
def batches(draw: st.DrawFn) -> Batch:
    """Batches of random length whose rows are all distinct (row i is tagged with i)."""
    length = draw(st.integers(min_value=0, max_value=24))
    width = draw(st.integers(min_value=0, max_value=3))
    values = draw(
        st.lists(st.integers(-1000, 1000), min_size=length * width, max_size=length * width)
    )
    return Batch.from_dict(
        tensors={
            "row": torch.arange(length),
            "values": torch.tensor(values, dtype=torch.int32).reshape(length, width),
        },
        non_tensors={
            "text": [f"t{i}" for i in range(length)],
            "weight": [i / 2 for i in range(length)],
        },
        meta={"seed": draw(st.integers(0, 5))},
    )


@settings(max_examples=40, deadline=None)
@given(batch=batches(), parts=st.integers(min_value=1, max_value=6))
def test_property_pad_chunk_concat_unpad_restores_the_batch(batch: Batch, parts: int) -> None:
    padded, pad_size = batch.pad_to_divisor(parts)
    assert len(padded) % parts == 0 and 0 <= pad_size < parts
    chunks = padded.chunk(parts)
    assert {len(chunk) for chunk in chunks} == {len(padded) // parts}
    assert_same(Batch.concat(chunks).unpad(pad_size), batch)


@settings(max_examples=40, deadline=None)
@given(batch=batches(), size=st.integers(min_value=1, max_value=7))
def test_property_split_concat_restores_the_batch(batch: Batch, size: int) -> None:
    pieces = batch.split(size)
    assert all(len(piece) == size for piece in pieces[:-1])
    if pieces:
        assert_same(Batch.concat(pieces), batch)


@settings(max_examples=40, deadline=None)
@given(batch=batches(), copies=st.integers(min_value=1, max_value=4), interleave=st.booleans())
def test_property_repeat_then_index_recovers_each_copy(
    batch: Batch, copies: int, interleave: bool
) -> None:
    repeated = batch.repeat(copies, interleave=interleave)
    assert len(repeated) == copies * len(batch)
    for copy in range(copies):
        if interleave:
            positions = [row * copies + copy for row in range(len(batch))]
        else:
            positions = [copy * len(batch) + row for row in range(len(batch))]
        assert_same(repeated.index(positions), batch)


def test_deepcopy_shares_no_memory_and_keeps_everything() -> None:
    import copy

    batch = Batch.from_dict(
        tensors={"x": torch.arange(6.0).view(3, 2)},
        non_tensors={"uid": ["a", "b", "c"]},
        meta={"n": 2, "nested": {"k": [1]}},
    )
    twin = copy.deepcopy(batch)
    assert len(twin) == 3 and list(twin["uid"]) == ["a", "b", "c"] and twin.meta == batch.meta
    torch.testing.assert_close(twin["x"], batch["x"])
    twin["x"].zero_()
    twin.meta["nested"]["k"].append(2)
    assert batch["x"].sum() == 15 and batch.meta["nested"]["k"] == [1]


def test_row_groups_stay_whole_in_shuffled_minibatches_and_splits() -> None:
    import torch

    from hfsdk.core.batch import ROW_GROUP, Batch, group_split

    rows = torch.arange(12)
    batch = Batch.from_dict(tensors={"x": rows}, meta={ROW_GROUP: 2})
    seen = []
    for mini in batch.iter_minibatches(3, shuffle=True, seed=5, group=2):
        values = mini["x"].tolist()
        assert len(values) == 4  # 3 rows rounded up to two whole pairs
        assert all(values[i] % 2 == 0 and values[i + 1] == values[i] + 1 for i in (0, 2))
        seen += values
    assert sorted(seen) == rows.tolist() and seen != rows.tolist()  # shuffled, all kept
    assert [len(part) for part in group_split(batch, 3)] == [4, 4, 4]
    with pytest.raises(HfsdkError, match="whole number of groups"):
        Batch.from_dict(tensors={"x": torch.arange(5)}).iter_minibatches(2, group=2)
