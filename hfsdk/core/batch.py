"""The batch protocol: the one data type that moves between controller and workers.

A :class:`Batch` holds ``B`` samples as

* ``tensors``: a :class:`~hfsdk.core.batch_columns.TensorColumns` mapping with ``batch_size
  [B]`` (every tensor has ``B`` rows in its first dimension),
* ``non_tensors``: per-sample numpy arrays of length ``B`` (object dtype for strings, dicts and
  lists; numeric arrays stay numeric),
* ``meta``: a plain dict of values shared by the whole batch (not per sample).

Row operations (``chunk``, ``split``, ``concat``, ``index``, ``repeat``, padding) apply to tensors
and non-tensors alike and copy ``meta`` shallowly. Pickling sends each tensor as one raw byte
buffer plus dtype and shape, so a batch crosses process boundaries (Ray) at the size of its data.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from numbers import Number
from typing import Any

import numpy as np
import torch

from hfsdk.core.batch_columns import TensorColumns
from hfsdk.core.errors import HfsdkError

# Bumped when the pickled layout changes, so an old/new mismatch is reported instead of misread.
_PICKLE_FORMAT = 1

ROW_GROUP = "row_group"
"""``meta`` key: rows come in consecutive groups of this many (e.g. 2 for interleaved
preference pairs) that a training backend keeps together, in order, in every mini- and
micro-batch (:meth:`Batch.iter_minibatches`, :func:`group_split`). Absent: 1."""


RowIndex = Sequence[int] | Sequence[bool] | torch.Tensor | np.ndarray | slice | range


class Batch:
    """Per-sample tensors, per-sample non-tensor arrays and a meta dict, all of length ``B``.

    ``Batch(tensors, non_tensors, meta, batch_size=None)``: ``tensors`` maps name to tensor;
    ``non_tensors`` maps name to a sequence or numpy array of length ``B``; ``meta`` holds
    values shared by all samples. A batch without per-sample keys has length 0 unless
    ``batch_size`` is given. Every length mismatch raises
    :class:`~hfsdk.core.errors.HfsdkError` naming the key and both lengths.

    Slicing operations (``chunk``, ``split``, ``index`` with a slice) return views that share
    memory with this batch; index lists, ``repeat`` and padding return copies.
    """

    __slots__ = ("_length", "meta", "non_tensors", "tensors")

    tensors: TensorColumns
    non_tensors: dict[str, np.ndarray]
    meta: dict[str, Any]

    def __init__(
        self,
        tensors: Mapping[str, torch.Tensor] | None = None,
        non_tensors: Mapping[str, Sequence[Any] | np.ndarray] | None = None,
        meta: Mapping[str, Any] | None = None,
        *,
        batch_size: int | None = None,
    ) -> None:
        tensor_items = _tensor_items(tensors)
        length, source = _resolve_length(tensors, tensor_items, non_tensors, batch_size)
        for key, value in tensor_items.items():
            _check_rows(key, int(value.shape[0]), length, source)
        arrays: dict[str, np.ndarray] = {}
        for key, value in (non_tensors or {}).items():
            _check_key(key)
            if key in tensor_items:
                raise HfsdkError(
                    f"batch key {key!r} is given both as a tensor and as a non-tensor; "
                    "each key must name one column — rename one of them"
                )
            array = _to_array(key, value)
            _check_rows(key, int(array.shape[0]), length, source)
            arrays[key] = array
        self.tensors = TensorColumns(tensor_items, length)
        self.non_tensors = arrays
        self.meta = dict(meta or {})
        self._length = length

    @classmethod
    def from_dict(
        cls,
        tensors: Mapping[str, torch.Tensor] | None = None,
        non_tensors: Mapping[str, Sequence[Any] | np.ndarray] | None = None,
        meta: Mapping[str, Any] | None = None,
        *,
        batch_size: int | None = None,
    ) -> Batch:
        """Build a batch from plain dicts of tensors and of per-sample sequences."""
        return cls(tensors, non_tensors, meta, batch_size=batch_size)

    @classmethod
    def _trusted(
        cls,
        tensors: dict[str, torch.Tensor],
        non_tensors: dict[str, np.ndarray],
        meta: dict[str, Any],
        length: int,
        device: torch.device | None = None,
    ) -> Batch:
        """Assemble a batch from parts already known to be consistent (no validation)."""
        batch = cls.__new__(cls)
        batch.tensors = TensorColumns(tensors, length, device)
        batch.non_tensors = non_tensors
        batch.meta = meta
        batch._length = length
        return batch

    def __len__(self) -> int:
        return self._length

    @property
    def batch_size(self) -> int:
        """Number of samples ``B``."""
        return self._length

    @property
    def tensor_keys(self) -> list[str]:
        """Names of the per-sample tensors, in insertion order."""
        return list(self.tensors.keys())

    @property
    def non_tensor_keys(self) -> list[str]:
        """Names of the per-sample non-tensor arrays, in insertion order."""
        return list(self.non_tensors)

    def keys(self) -> list[str]:
        """All per-sample keys: tensor keys first, then non-tensor keys (meta is not included)."""
        return self.tensor_keys + self.non_tensor_keys

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and (key in self.non_tensors or key in self.tensors)

    def __getitem__(self, key: str) -> torch.Tensor | np.ndarray:
        if not isinstance(key, str):
            raise TypeError(
                f"Batch[...] takes a key name, got {type(key).__name__}; "
                "use batch.index(rows) to select rows"
            )
        if key in self.non_tensors:
            return self.non_tensors[key]
        if key in self.tensors:
            return self.tensors.get(key)
        raise KeyError(self._missing_key_message(key))

    def __setitem__(self, key: str, value: torch.Tensor | Sequence[Any] | np.ndarray) -> None:
        """Add or replace a per-sample column; its first dimension must be the batch length.

        A batch with no per-sample keys and length 0 takes the length of the first column set.
        """
        _check_key(key)
        if isinstance(value, torch.Tensor):
            _check_tensor(key, value)
            rows = int(value.shape[0])
        else:
            value = _to_array(key, value)
            rows = int(value.shape[0])
        if not self.keys() and self._length == 0 and rows != 0:
            self._length = rows
            self.tensors = TensorColumns({}, rows, self.tensors.device)
        _check_rows(key, rows, self._length, "the batch")
        # A key names one column, so replacing it with the other kind drops the old one.
        if isinstance(value, torch.Tensor):
            self.non_tensors.pop(key, None)
            self.tensors.set(key, value)
        else:
            if key in self.tensors:
                del self.tensors[key]
            self.non_tensors[key] = value

    def __delitem__(self, key: str) -> None:
        if key in self.non_tensors:
            del self.non_tensors[key]
        elif key in self.tensors:
            del self.tensors[key]
        else:
            raise KeyError(self._missing_key_message(key))

    def __iter__(self) -> Iterator[Any]:
        # Rows and keys would both be plausible meanings; refuse rather than guess.
        raise TypeError(
            "a Batch is not iterable; use batch.keys() for its keys, or batch.split(1) / "
            "batch.iter_minibatches(size) for its rows"
        )

    def __repr__(self) -> str:
        tensor_parts = [
            f"{key}: {tuple(value.shape)} {str(value.dtype).removeprefix('torch.')}"
            for key, value in self.tensors.items()
        ]
        array_parts = [
            f"{key}: {value.shape} {value.dtype}" for key, value in self.non_tensors.items()
        ]
        return (
            f"Batch(len={self._length}, tensors={{{', '.join(tensor_parts)}}}, "
            f"non_tensors={{{', '.join(array_parts)}}}, meta_keys={list(self.meta)})"
        )

    def _missing_key_message(self, key: object) -> str:
        return f"batch has no key {key!r}; its keys are {self.keys()}"

    def select(
        self,
        tensor_keys: Iterable[str] | None = None,
        non_tensor_keys: Iterable[str] | None = None,
        meta_keys: Iterable[str] | None = None,
    ) -> Batch:
        """A batch with only the named keys; ``None`` keeps every key of that kind, ``[]`` none.

        The result shares its tensors and arrays with this batch (no copy).
        """
        tensor_names = self.tensor_keys if tensor_keys is None else list(tensor_keys)
        array_names = self.non_tensor_keys if non_tensor_keys is None else list(non_tensor_keys)
        meta_names = list(self.meta) if meta_keys is None else list(meta_keys)
        self._require_keys(tensor_names, self.tensor_keys, "tensor")
        self._require_keys(array_names, self.non_tensor_keys, "non-tensor")
        self._require_keys(meta_names, list(self.meta), "meta")
        return Batch._trusted(
            {key: self.tensors.get(key) for key in tensor_names},
            {key: self.non_tensors[key] for key in array_names},
            {key: self.meta[key] for key in meta_names},
            self._length,
            self.tensors.device,
        )

    def pop(
        self,
        tensor_keys: Iterable[str] | None = None,
        non_tensor_keys: Iterable[str] | None = None,
        meta_keys: Iterable[str] | None = None,
    ) -> Batch:
        """Remove the named keys from this batch and return them as a new batch.

        ``None`` pops nothing of that kind. The popped batch keeps this batch's length.
        """
        tensor_names = list(tensor_keys or [])
        array_names = list(non_tensor_keys or [])
        meta_names = list(meta_keys or [])
        popped = self.select(tensor_names, array_names, meta_names)
        for key in tensor_names:
            del self.tensors[key]
        for key in array_names:
            del self.non_tensors[key]
        for key in meta_names:
            del self.meta[key]
        return popped

    def union(self, other: Batch) -> Batch:
        """A new batch with the keys of both; a key present in both must hold equal values.

        Lengths must match, except that a batch with no per-sample keys and length 0 (e.g. one
        that only carries meta) can be joined to any batch.
        """
        if not (self._is_blank() or other._is_blank() or other._length == self._length):
            raise HfsdkError(
                f"cannot union batches of length {self._length} and {other._length}: "
                "both must hold the same samples in the same order — index or pad one first"
            )
        length = other._length if self._is_blank() else self._length
        tensors: dict[str, torch.Tensor] = dict(self.tensors.items())
        arrays = dict(self.non_tensors)
        for kind, mine, theirs, other_kind, elsewhere in (
            ("tensor", tensors, other.tensors, "non-tensor", self.non_tensors),
            ("non-tensor", arrays, other.non_tensors, "tensor", self.tensors),
        ):
            for key, value in theirs.items():
                if key in elsewhere:
                    raise HfsdkError(
                        f"union: key {key!r} is a {other_kind} in the first batch and a {kind} "
                        "in the second; rename one of them"
                    )
                if key in mine and not _values_equal(mine[key], value):
                    raise HfsdkError(_conflict_message(kind, key, mine[key], value))
                mine[key] = value
        meta = _merge_meta([self.meta, other.meta], "union")
        device = self.tensors.device if self.tensors.device == other.tensors.device else None
        return Batch._trusted(tensors, arrays, meta, length, device)

    def _is_blank(self) -> bool:
        return self._length == 0 and not self.keys()

    @staticmethod
    def _require_keys(wanted: list[str], available: list[str], kind: str) -> None:
        if missing := [key for key in wanted if key not in available]:
            raise HfsdkError(
                f"batch has no {kind} key(s) {missing}; its {kind} keys are {available}"
            )

    def index(self, idx: RowIndex) -> Batch:
        """Rows selected by an index list/tensor/array, a boolean mask of length ``B``, or a slice.

        Negative indices count from the end. A slice with a positive step returns views; every
        other index returns copies.
        """
        if isinstance(idx, slice):
            start, stop, step = idx.indices(self._length)
            if step > 0:
                return self._slice(start, stop, step)
        return self._take(self._row_positions(idx))

    def chunk(self, n: int) -> list[Batch]:
        """``n`` equal consecutive parts (views); the length must be divisible by ``n``."""
        _check_positive("chunk", "n", n)
        if self._length % n != 0:
            raise HfsdkError(
                f"cannot chunk a batch of length {self._length} into {n} equal parts "
                f"({self._length} % {n} = {self._length % n}); call "
                f"batch.pad_to_divisor({n}) first and unpad the collected result"
            )
        size = self._length // n
        return [self._slice(i * size, (i + 1) * size) for i in range(n)]

    def split(self, size: int) -> list[Batch]:
        """Consecutive pieces (views) of ``size`` rows; the last may be shorter."""
        _check_positive("split", "size", size)
        return [self._slice(i, min(i + size, self._length)) for i in range(0, self._length, size)]

    @staticmethod
    def concat(batches: Sequence[Batch]) -> Batch:
        """Stack batches with the same keys row-wise (copies); meta values must agree.

        Meta keys are merged; a key present in several batches must have the same value.
        """
        batches = list(batches)
        if not batches:
            raise HfsdkError("Batch.concat needs at least one batch, got an empty list")
        first = batches[0]
        for position, batch in enumerate(batches[1:], start=1):
            _check_same_keys(first, batch, position)
        tensors: dict[str, torch.Tensor] = {}
        for key in first.tensor_keys:
            parts = [batch.tensors.get(key) for batch in batches]
            _check_concat_parts(key, parts)
            tensors[key] = torch.cat(parts, dim=0)
        arrays: dict[str, np.ndarray] = {}
        for key in first.non_tensor_keys:
            parts_np = [batch.non_tensors[key] for batch in batches]
            if any(part.shape[1:] != parts_np[0].shape[1:] for part in parts_np):
                shapes = [part.shape for part in parts_np]
                raise HfsdkError(
                    f"cannot concat non-tensor {key!r}: shapes {shapes} differ beyond the first "
                    "dimension; make the per-sample shapes equal first"
                )
            arrays[key] = np.concatenate(parts_np, axis=0)
        meta = _merge_meta([batch.meta for batch in batches], "concat")
        length = sum(len(batch) for batch in batches)
        devices = {batch.tensors.device for batch in batches}
        return Batch._trusted(
            tensors, arrays, meta, length, devices.pop() if len(devices) == 1 else None
        )

    def repeat(self, n: int, interleave: bool = True) -> Batch:
        """Each row ``n`` times: ``[a, a, b, b]`` when interleaving, else ``[a, b, a, b]``."""
        _check_positive("repeat", "n", n)
        rows = torch.arange(self._length)
        positions = rows.repeat_interleave(n) if interleave else rows.repeat(n)
        return self._take(positions)

    def pad_to_divisor(self, divisor: int) -> tuple[Batch, int]:
        """Pad to a multiple of ``divisor`` by repeating rows from the start.

        Returns ``(padded_batch, pad_size)``.

        Padded rows are valid samples, so workers can run on them; the caller keeps ``pad_size``
        and calls :meth:`unpad` on the collected result. With nothing to pad the result shares
        this batch's data.
        """
        _check_positive("pad_to_divisor", "divisor", divisor)
        pad_size = -self._length % divisor
        if pad_size == 0:
            return self._slice(0, self._length), 0
        # pad_size can exceed the length (divisor > B), so wrap around the rows.
        positions = torch.cat([torch.arange(self._length), torch.arange(pad_size) % self._length])
        return self._take(positions), pad_size

    def unpad(self, pad_size: int) -> Batch:
        """Drop the last ``pad_size`` rows (the ones :meth:`pad_to_divisor` added)."""
        if not isinstance(pad_size, int) or not 0 <= pad_size <= self._length:
            raise HfsdkError(
                f"unpad: pad_size must be an int between 0 and the batch length "
                f"{self._length}, got {pad_size!r}; pass the pad_size pad_to_divisor returned"
            )
        return self._slice(0, self._length - pad_size)

    def iter_minibatches(
        self, size: int, shuffle: bool = False, seed: int | None = None, group: int = 1
    ) -> Iterator[Batch]:
        """Mini-batches of ``size`` rows covering every row once; the last may be shorter.

        With ``shuffle`` the rows are permuted by a ``torch.Generator`` seeded with ``seed``
        (the same seed gives the same order; ``None`` draws a fresh seed).
        ``group``: rows come in consecutive groups of this many that stay together and in
        order (``meta[ROW_GROUP]``, e.g. 2 for interleaved preference pairs); ``size`` is
        rounded up to a whole number of groups and shuffling permutes whole groups.
        """
        # Validate now, not at the first next(), so bad arguments fail where they are passed.
        _check_positive("iter_minibatches", "size", size)
        _check_positive("iter_minibatches", "group", group)
        if self._length % group:
            raise HfsdkError(
                f"iter_minibatches(group={group}) needs a whole number of groups, but the batch "
                f"has {self._length} rows; pad or drop rows so the count divides by {group}"
            )
        size = -(-size // group) * group
        if not shuffle:
            return iter(self.split(size))
        generator = torch.Generator()
        if seed is None:
            generator.seed()
        else:
            generator.manual_seed(seed)
        blocks = torch.randperm(self._length // group, generator=generator)
        order = (blocks[:, None] * group + torch.arange(group)[None, :]).reshape(-1)
        return (self._take(order[start : start + size]) for start in range(0, self._length, size))

    def to(self, device: str | torch.device) -> Batch:
        """A batch with every tensor on ``device``; non-tensors and meta are shared."""
        return Batch._trusted(
            {key: value.to(device) for key, value in self.tensors.items()},
            dict(self.non_tensors),
            dict(self.meta),
            self._length,
            torch.device(device),
        )

    def _slice(self, start: int, stop: int, step: int = 1) -> Batch:
        return Batch._trusted(
            {key: value[start:stop:step] for key, value in self.tensors.items()},
            {key: value[start:stop:step] for key, value in self.non_tensors.items()},
            dict(self.meta),
            len(range(start, stop, step)),
            self.tensors.device,
        )

    def _take(self, positions: torch.Tensor) -> Batch:
        """Rows at ``positions`` (an int64 CPU tensor of valid, non-negative indices)."""
        positions_np = positions.numpy()
        return Batch._trusted(
            {
                key: value.index_select(0, positions.to(value.device))
                for key, value in self.tensors.items()
            },
            {key: value[positions_np] for key, value in self.non_tensors.items()},
            dict(self.meta),
            int(positions.shape[0]),
            self.tensors.device,
        )

    def _row_positions(self, idx: RowIndex) -> torch.Tensor:
        """Normalise a row index to an int64 CPU tensor of non-negative positions."""
        if isinstance(idx, slice):
            return torch.arange(*idx.indices(self._length))
        if isinstance(idx, (int, np.integer)):
            raise HfsdkError(
                f"batch.index takes several rows, got the single int {idx}; pass [{idx}] "
                "for a one-row batch"
            )
        positions = torch.as_tensor(list(idx) if isinstance(idx, range) else idx).cpu()
        if positions.dim() != 1:
            raise HfsdkError(f"batch.index expects a 1-D index, got shape {tuple(positions.shape)}")
        if positions.dtype == torch.bool:
            if positions.shape[0] != self._length:
                raise HfsdkError(
                    f"boolean row mask has length {positions.shape[0]} but the batch has "
                    f"{self._length} rows; give one flag per row"
                )
            return positions.nonzero().squeeze(1)
        if positions.numel() == 0:
            return positions.to(torch.int64)
        if positions.is_floating_point() or positions.is_complex():
            raise HfsdkError(
                f"batch.index expects integer row positions or a boolean mask, got dtype "
                f"{positions.dtype}"
            )
        positions = positions.to(torch.int64)
        bad = positions[(positions < -self._length) | (positions >= self._length)]
        if bad.numel():
            raise HfsdkError(
                f"row index {int(bad[0])} is out of range for a batch of length {self._length}; "
                f"valid positions are {-self._length}..{self._length - 1}"
            )
        return torch.where(positions < 0, positions + self._length, positions)

    def __deepcopy__(self, memo: dict[int, Any]) -> Batch:
        """A batch sharing no memory with this one (what a trip between processes gives).

        Tensors are cloned directly; the generic deep copy would go through
        :meth:`__getstate__`'s byte buffers.
        """
        import copy

        return Batch._trusted(
            {key: value.detach().clone() for key, value in self.tensors.items()},
            copy.deepcopy(self.non_tensors, memo),
            copy.deepcopy(self.meta, memo),
            self._length,
            device=self.tensors.device,
        )

    def __getstate__(self) -> dict[str, Any]:
        """Tensors as raw byte buffers (uint8 numpy arrays) plus dtype and shape.

        Only the bytes a tensor covers are sent — a view of a larger tensor does not drag its
        whole storage along, unlike ``torch.save``. Tensors are detached and sent from the CPU.
        """
        tensors = []
        for key, value in self.tensors.items():
            flat = value.detach().to("cpu").resolve_conj().resolve_neg().contiguous().reshape(-1)
            tensors.append(
                (key, str(flat.dtype), tuple(value.shape), flat.view(torch.uint8).numpy())
            )
        return {
            "format": _PICKLE_FORMAT,
            "length": self._length,
            "tensors": tensors,
            "non_tensors": self.non_tensors,
            "meta": self.meta,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Rebuild tensors (on the CPU) from their byte buffers; move them with :meth:`to`."""
        if state.get("format") != _PICKLE_FORMAT:
            raise HfsdkError(
                f"cannot unpickle a Batch in format {state.get('format')!r}; this hfsdk reads "
                f"format {_PICKLE_FORMAT} — use the same hfsdk version on both ends"
            )
        length = state["length"]
        tensors = {}
        for key, dtype_name, shape, buffer in state["tensors"]:
            if not buffer.flags.writeable:  # Ray's zero-copy buffers; torch needs writable memory
                buffer = buffer.copy()
            dtype = getattr(torch, dtype_name.removeprefix("torch."))
            # An empty array's copy has stride 0, which view() refuses.
            flat = torch.from_numpy(buffer) if buffer.size else torch.empty(0, dtype=torch.uint8)
            tensors[key] = flat.view(dtype).reshape(shape)
        self.tensors = TensorColumns(tensors, length)
        self.non_tensors = state["non_tensors"]
        self.meta = state["meta"]
        self._length = length


def _check_key(key: object) -> None:
    if not isinstance(key, str):
        raise HfsdkError(f"batch keys must be strings, got {key!r} ({type(key).__name__})")


def _check_positive(operation: str, name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise HfsdkError(f"{operation}: {name} must be a positive int, got {value!r}")


def _check_tensor(key: str, value: torch.Tensor) -> None:
    if value.dim() == 0:
        raise HfsdkError(
            f"tensor {key!r} is a scalar; per-sample tensors need the batch as their first "
            "dimension — put values shared by all samples in meta"
        )


def _check_rows(key: str, rows: int, length: int, source: str) -> None:
    if rows != length:
        raise HfsdkError(
            f"batch key {key!r} has {rows} rows but the batch has {length} (set by {source}); "
            "every per-sample tensor and array needs the batch length as its first dimension "
            "— put values shared by all samples in meta"
        )


def _tensor_items(tensors: Mapping[str, torch.Tensor] | None) -> dict[str, torch.Tensor]:
    """The tensors of a mapping, checked to be flat, named, non-scalar tensors."""
    if tensors is None:
        return {}
    if not isinstance(tensors, Mapping):
        raise HfsdkError(f"tensors must be a dict of tensors, got {type(tensors).__name__}")
    items = dict(tensors)
    for key, value in items.items():
        _check_key(key)
        if not isinstance(value, torch.Tensor):
            raise HfsdkError(
                f"batch tensor {key!r} is a {type(value).__name__}, not a torch.Tensor; pass "
                "strings, dicts and other objects in non_tensors and shared values in meta"
            )
        _check_tensor(key, value)
    return items


def _to_array(key: str, value: Sequence[Any] | np.ndarray) -> np.ndarray:
    """Per-sample values as a numpy array: numeric stays numeric, anything else is object dtype."""
    if isinstance(value, torch.Tensor):
        raise HfsdkError(
            f"non-tensor {key!r} is a torch.Tensor; put tensors in tensors, not non_tensors"
        )
    if isinstance(value, np.ndarray):
        if value.ndim == 0:
            raise HfsdkError(
                f"non-tensor {key!r} is a 0-d array; per-sample values need one entry per "
                "sample — put values shared by all samples in meta"
            )
        # Fixed-width string arrays would truncate on concat with longer strings.
        return value.astype(object) if value.dtype.kind in "USV" else value
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise HfsdkError(
            f"non-tensor {key!r} is a {type(value).__name__}; per-sample values must be a list "
            "or numpy array with one entry per sample — put values shared by all samples in meta"
        )
    if all(isinstance(item, (Number, np.number, np.bool_)) for item in value) and value:
        return np.asarray(value)
    # Fill element-wise so equal-length lists stay one object per sample (not a 2-D array).
    array = np.empty(len(value), dtype=object)
    for position, item in enumerate(value):
        array[position] = item
    return array


def _resolve_length(
    tensors: Mapping[str, torch.Tensor] | None,
    tensor_items: dict[str, torch.Tensor],
    non_tensors: Mapping[str, Any] | None,
    batch_size: int | None,
) -> tuple[int, str]:
    """The batch length and a description of what set it (for error messages)."""
    if batch_size is not None:
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 0:
            raise HfsdkError(f"batch_size must be a non-negative int, got {batch_size!r}")
        return batch_size, f"batch_size={batch_size}"
    if tensor_items:
        key, value = next(iter(tensor_items.items()))
        return int(value.shape[0]), f"tensor {key!r}"
    for key, value in (non_tensors or {}).items():
        if isinstance(value, np.ndarray) and value.ndim > 0:
            return int(value.shape[0]), f"non-tensor {key!r}"
        if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
            return len(value), f"non-tensor {key!r}"
    return 0, "an empty batch"


def _check_same_keys(first: Batch, other: Batch, position: int) -> None:
    for kind, mine, theirs in (
        ("tensor", first.tensor_keys, other.tensor_keys),
        ("non-tensor", first.non_tensor_keys, other.non_tensor_keys),
    ):
        if set(mine) != set(theirs):
            only_first = sorted(set(mine) - set(theirs))
            only_other = sorted(set(theirs) - set(mine))
            raise HfsdkError(
                f"cannot concat: batch 0 and batch {position} have different {kind} keys "
                f"(only in batch 0: {only_first}; only in batch {position}: {only_other}); "
                "select or add keys so every batch has the same ones"
            )


def _check_concat_parts(key: str, parts: list[torch.Tensor]) -> None:
    trailing = {tuple(part.shape[1:]) for part in parts}
    dtypes = {part.dtype for part in parts}
    if len(trailing) > 1:
        shapes = [tuple(part.shape) for part in parts]
        raise HfsdkError(
            f"cannot concat tensor {key!r}: shapes {shapes} differ beyond the first dimension; "
            "pad them to the same per-sample shape first"
        )
    if len(dtypes) > 1:
        raise HfsdkError(
            f"cannot concat tensor {key!r}: dtypes {sorted(str(d) for d in dtypes)} differ; "
            "cast them to one dtype first"
        )


def _merge_meta(metas: list[dict[str, Any]], operation: str) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for meta in metas:
        for key, value in meta.items():
            if key in merged and not _values_equal(merged[key], value):
                raise HfsdkError(
                    f"{operation}: meta key {key!r} differs between batches ({merged[key]!r} vs "
                    f"{value!r}); meta holds values shared by all samples — store per-batch "
                    "values under different keys or reduce them first"
                )
            merged.setdefault(key, value)
    return merged


def _conflict_message(kind: str, key: str, first: Any, second: Any) -> str:
    return (
        f"union: {kind} {key!r} is in both batches with different values "
        f"({_describe(first)} vs {_describe(second)}); drop it from one batch with pop() or "
        "select() before the union"
    )


def _describe(value: Any) -> str:
    if isinstance(value, (torch.Tensor, np.ndarray)):
        return f"{tuple(value.shape)} {value.dtype}"
    return repr(value)


def _values_equal(first: Any, second: Any) -> bool:
    """Exact equality for tensors, arrays and (nested) plain values; never raises."""
    if isinstance(first, torch.Tensor) or isinstance(second, torch.Tensor):
        return (
            isinstance(first, torch.Tensor)
            and isinstance(second, torch.Tensor)
            and first.shape == second.shape
            and first.dtype == second.dtype
            and torch.equal(first.detach().cpu(), second.detach().cpu())
        )
    if isinstance(first, np.ndarray) or isinstance(second, np.ndarray):
        if not (isinstance(first, np.ndarray) and isinstance(second, np.ndarray)):
            return False
        if first.shape != second.shape or (first.dtype == object) != (second.dtype == object):
            return False
        if first.dtype == object:
            return all(
                _values_equal(a, b) for a, b in zip(first.ravel(), second.ravel(), strict=True)
            )
        return first.dtype == second.dtype and bool(np.array_equal(first, second))
    if isinstance(first, Mapping) and isinstance(second, Mapping):
        return first.keys() == second.keys() and all(
            _values_equal(first[key], second[key]) for key in first
        )
    if isinstance(first, (list, tuple)) and isinstance(second, (list, tuple)):
        return (
            type(first) is type(second)
            and len(first) == len(second)
            and all(_values_equal(a, b) for a, b in zip(first, second, strict=True))
        )
    try:
        return bool(first == second)
    except Exception:  # an __eq__ that returns something without a truth value
        return False


def row_group(batch: Batch) -> int:
    """The batch's row group size (``meta[ROW_GROUP]``, 1 when absent)."""
    return int(batch.meta.get(ROW_GROUP, 1))


def group_split(batch: Batch, size: int) -> list[Batch]:
    """``batch.split(size)``, ``size`` rounded up to whole row groups (:data:`ROW_GROUP`)."""
    group = row_group(batch)
    return batch.split(-(-size // group) * group)
