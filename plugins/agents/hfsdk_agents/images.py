"""Images in multi-turn trajectories: what a rollout must offer, and the request that carries them.

A trajectory whose prompt has images, or whose tool returned one (:class:`ToolResult`), holds
its images in context order beside its tokens, each image's tokens in the token stream
(token-in, as everywhere in the runner). Only a rollout that implements :class:`ImageTurns`
can turn an image into its tokens, generate from a context with images and give the training
batch the images' model inputs; a tool image with any other rollout stops the run in one line.
Turns with images are batched through ``generate_sequences`` (the request carries the images
as the non-tensor column :data:`IMAGES`); such trajectories are never re-rendered into
step-wise segments (a template knows nothing of the images' tokens).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

from hfsdk import GenerationRequest

if TYPE_CHECKING:
    from hfsdk import Batch

IMAGES = "images"
"""The non-tensor column of each row's images (in context order) in the batches
:class:`ImageTurns` rollouts get from the turn batcher (verl's column name)."""


@runtime_checkable
class ImageTurns(Protocol):
    """What a rollout offers so that trajectories may carry images (``hf_vision`` does).

    Its ``generate_sequences`` also takes token-in prompts: ``input_ids`` whose image tokens
    are already expanded, with the rows' images in the non-tensor column :data:`IMAGES`; its
    ``serving()`` (entered around a whole step's trajectories on every rank) holds what those
    calls need, so ranks may make different numbers of them.
    """

    def image_prompts(self, prompts: Batch) -> Batch:
        """``prompts`` with each image's tokens in ``input_ids`` (left-padded), the token-in
        form of the rows' contexts; other columns as they were."""
        ...

    def row_images(self, row: Mapping[str, Any]) -> list[Any]:
        """The images of a prompt row (its non-tensor columns), in the order of their tokens."""
        ...

    def image_text(self, image: Any) -> str:
        """The text that stands for ``image`` (an encoded image file) in a context turn: its
        image tokens, which the tokenizer reads as special tokens."""
        ...

    def with_images(self, batch: Batch, images: Sequence[Sequence[Any]]) -> Batch:
        """The assembled rollout batch with each row's ``images`` as the forward's inputs;
        one error naming the row where its image tokens and images disagree."""
        ...


@attrs.frozen(kw_only=True)
class ImageRequest(GenerationRequest):
    """A turn whose context holds images: ``images`` are those of ``prompt_ids``' image tokens,
    in order (the turn batcher sends them to the rollout with the token ids)."""

    images: tuple[Any, ...] = attrs.field(default=(), converter=tuple)


def image_turns(rollout: Any) -> ImageTurns | None:
    """``rollout`` when it can carry images in trajectories, else ``None``."""
    return rollout if isinstance(rollout, ImageTurns) else None
