"""Extra per-row model inputs a batch carries beside its token ids (images, ...).

Some models take more than ``input_ids``/``attention_mask``/``position_ids`` in their forward:
a vision-language model takes each row's image patches and grids and its own multimodal
rotary positions. A batch that needs them names a ``model_inputs`` registry entry
(``hfsdk_register_model_inputs``) in ``batch.meta[MODEL_INPUTS]`` and carries the entry's
per-row tensor ``columns``; a training backend asks :func:`model_inputs_of` and, when there is
an entry, lets it build the forward's keyword arguments. Such rows are not packed and no
padding columns are dropped: the entry sees the rows as the rollout made them.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    import torch

    from hfsdk.core.batch import Batch

MODEL_INPUTS = "model_inputs"
"""``Batch.meta`` key: the name of the ``model_inputs`` entry that builds the rows' forward."""


class ModelInputs(abc.ABC):
    """How a model family's extra per-row inputs reach its forward.

    ``columns``: the per-row tensor columns of a batch the entry reads (they move with their
    rows through chunking, repeats and micro-batches like any column).
    """

    columns: ClassVar[tuple[str, ...]] = ()

    @abc.abstractmethod
    def forward_kwargs(
        self, model: torch.nn.Module, micro: Batch, inputs: dict[str, Any]
    ) -> dict[str, Any]:
        """The forward's keyword arguments for the rows of ``micro``.

        ``inputs`` holds what a text model gets (``input_ids``, ``attention_mask``,
        ``position_ids``, ``use_cache``), on the model's device; return them with entries
        added or replaced (e.g. pixel values, multimodal ``position_ids``). ``model`` is the
        HF model (or its wrapper) the forward runs on.
        """

    def suppressed_token_ids(self, model: torch.nn.Module) -> list[int]:
        """Token ids the rollout never samples for these rows (e.g. image placeholders, whose
        sampling would break the next forward); log-probs leave them out of the distribution
        the same way, so they equal the sampler's. Default: none."""
        return []


def model_inputs_of(batch: Batch) -> ModelInputs | None:
    """The ``model_inputs`` entry ``batch.meta[MODEL_INPUTS]`` names, or ``None`` (text rows)."""
    name = batch.meta.get(MODEL_INPUTS)
    if name is None:
        return None
    from hfsdk.core.plugin_manager import get_registry

    return get_registry("model_inputs")[str(name)].impl
