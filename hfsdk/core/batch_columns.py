"""The per-sample tensors of a :class:`~hfsdk.core.batch.Batch`: a small typed mapping.

``benchmarks/tensordict_ops.py`` measured TensorDict's own row operations
against ``Batch``'s per-key loops: its indexing, ``cat`` and slicing were
slower (a gathered index 2.5x), only ``split`` faster, and building a
TensorDict around each result was the largest share of a small batch's row
operation. ``Batch`` used it as a dict, so a dict it is, with the two
attributes code reads from it (``batch_size``, ``device``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping

import torch


class TensorColumns(MutableMapping[str, torch.Tensor]):
    """Name -> tensor whose first dimension is the batch length; iterates its names.

    ``batch_size`` is ``torch.Size([B])``; ``device`` is the device the batch was
    moved to with :meth:`~hfsdk.core.batch.Batch.to` (``None``: wherever its tensors are).
    The batch checks shapes; this mapping stores what it is given.
    """

    __slots__ = ("_data", "batch_size", "device")

    def __init__(
        self,
        data: Mapping[str, torch.Tensor] | None = None,
        batch_size: int = 0,
        device: torch.device | str | None = None,
    ) -> None:
        self._data: dict[str, torch.Tensor] = dict(data or {})
        self.batch_size = torch.Size([batch_size])
        self.device = torch.device(device) if device is not None else None

    def __getitem__(self, key: str) -> torch.Tensor:
        return self._data[key]

    def __setitem__(self, key: str, value: torch.Tensor) -> None:
        self._data[key] = value

    def __delitem__(self, key: str) -> None:
        del self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def set(self, key: str, value: torch.Tensor) -> None:
        """``self[key] = value`` (TensorDict's spelling, kept for callers that use it)."""
        self._data[key] = value

    def __repr__(self) -> str:
        shapes = ", ".join(f"{k}: {tuple(v.shape)}" for k, v in self._data.items())
        return f"TensorColumns({{{shapes}}}, batch_size={list(self.batch_size)})"
