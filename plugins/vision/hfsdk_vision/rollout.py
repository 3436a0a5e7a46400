"""``hf_vision``: a rollout backend that generates from image prompts, through the contract.

The hfsdk decoder has no vision path, so this backend decodes with transformers' ``generate``
(:func:`hfsdk_vision.generation.sample`) on a module holding the actor's current weights,
obtained as the ``hf`` rollout obtains them (``hfsdk_backend_common``'s ``ActorWeights``): the
actor's own module when it generates as is (one process, float32, no LoRA), else a module of
its architecture filled from the actor's weights for the call (sharded actors, bfloat16, LoRA
merged) and freed after it. Each prompt row brings its
text (the data loader's ``rendered_prompt`` column, ``<image>`` where an image goes) and its
images (the dataset's ``images`` column, verl's layout: ``{"bytes": ...}``, bytes or paths); the
rollout encodes them with the model directory's image processor and returns the contract's
batch plus the images as per-row columns (:mod:`hfsdk_vision.batch_images`) and
``meta[hfsdk.MODEL_INPUTS] = "qwen2_vl_images"``, so the training backend's forward gets the
same pixels, grids and multimodal positions the sampler used. The sampler's own log-probs come
back as ``rollout_log_probs``.

Multi-turn: the backend also offers what the agents plugin asks of a rollout whose trajectories
carry images (``hfsdk_agents.images.ImageTurns``, met by its methods, no import): prompts as
token ids with each image's tokens expanded (:meth:`VisionRollout.image_prompts`), an image's
token text for a tool turn (:meth:`VisionRollout.image_text`), token-in generation (prompts
without ``rendered_prompt``: ``input_ids`` and the rows' ``images``) and the assembled batch's
image columns (:meth:`VisionRollout.with_images`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import attrs

from hfsdk import (
    DATA_DIR,
    MODEL_INPUTS,
    ActorSource,
    Batch,
    HfsdkError,
    RolloutBackend,
    RolloutConfig,
    assemble_rollout,
    eos_token_ids,
    help_field,
)
from hfsdk_backend_common.rollout.actor_weights import ActorWeights
from hfsdk_vision.batch_images import agreed_widths, per_row_images, row_widths
from hfsdk_vision.data import decode_image, image_list, resolved_item, row_base
from hfsdk_vision.forward_inputs import NAME as MODEL_INPUTS_NAME
from hfsdk_vision.generation import sample
from hfsdk_vision.invariant import check_image_tokens
from hfsdk_vision.tokens import IMAGE_PAD, VISION_END, VISION_START, expand_placeholders

if TYPE_CHECKING:
    from hfsdk_vision.processor import VisionProcessor

BACKEND = "hf_vision"
"""The rollout registry name of :class:`VisionRollout`."""

PROMPT_TEXT = "rendered_prompt"
"""The prompt loader's column of the text the model sees (the prompt after its template)."""

IMAGES = "images"
"""The dataset column of each row's images (verl's name)."""


@attrs.frozen(kw_only=True)
class VisionRolloutConfig(RolloutConfig):
    """Sampling from image prompts with ``generate`` on the actor's current weights.

    ``temperature: 0`` means greedy decoding (no top-k/top-p filters: the sampler's log-probs
    are the plain tempered distribution's, vision tokens excluded).
    """

    backend: str = help_field(
        "Rollout backend (hf_vision: transformers generate from image prompts).",
        default=BACKEND,
    )
    max_prompt_length: int = help_field(
        "Widest prompt text (tokens, before each image becomes its image tokens); follows "
        "from data.max_prompt_length: leave it unset.",
        default=64,
        validator=attrs.validators.ge(1),
    )
    max_response_length: int = help_field(
        "Longest response in tokens; responses are padded to it.",
        default=8,
        validator=attrs.validators.ge(1),
    )
    temperature: float = help_field(
        "Sampling temperature (0: greedy).", default=1.0, validator=attrs.validators.ge(0.0)
    )
    n: int = help_field(
        "Samples per prompt inside the rollout; must stay 1 in training (use "
        "algorithm.n_samples_per_prompt).",
        default=1,
        validator=attrs.validators.ge(1),
    )
    share_image_encoding: bool = help_field(
        "Encode each prompt's images once for its n samples in one sample() call (n > 1); "
        "a training run generates with n=1 (its samples per prompt are separate rows), so "
        "there it has no effect.",
        default=True,
    )
    weight_sync: Literal["stream", "gather"] = help_field(
        "How a sharded actor's weights reach generate: stream (one FSDP unit at a time into a "
        "module that exists for the call) or gather (the whole model at once).",
        default="stream",
        validator=attrs.validators.in_(("stream", "gather")),
    )


class VisionRollout(RolloutBackend):
    """``n`` responses per image prompt with the actor's current weights.

    ``generate_sequences(prompts, n=None, greedy=None)``: ``n``/``greedy`` default to
    ``prompts.meta['n']``/``['greedy']``, then to the config. Collective: each data-parallel
    rank generates for its own prompts, and every rank takes part in reading the weights.
    """

    reports_log_probs = True

    config: VisionRolloutConfig
    collective = True

    def __init__(self, config: VisionRolloutConfig, actor: ActorSource) -> None:
        super().__init__(config, actor)
        if getattr(actor.hf_config, "image_token_id", None) is None:
            raise HfsdkError(
                f"rollout.backend={BACKEND} generates from images, but the actor's model "
                f"({type(actor.hf_config).__name__}) has no image token; use a Qwen2-VL-family "
                "model or rollout.backend=hf"
            )
        if actor.tokenizer.pad_token_id is None:
            raise HfsdkError("the tokenizer has no pad token; save one with the model")
        self.eos_ids = eos_token_ids(list(actor.generation_eos_ids), actor.tokenizer)
        self._processor: VisionProcessor | None = None
        self._weights = ActorWeights(actor, config.weight_sync)
        self._held: Any = None

    @property
    def processor(self) -> VisionProcessor:
        """The model directory's image processor over the actor's tokenizer (loaded once)."""
        if self._processor is None:
            from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
                Qwen2VLImageProcessorPil,
            )

            from hfsdk_vision.processor import VisionProcessor

            image_processor = Qwen2VLImageProcessorPil.from_pretrained(str(self.actor.model_path))
            self._processor = VisionProcessor(image_processor, self.actor.tokenizer)
        return self._processor

    def _decoded(
        self, rows: Sequence[Sequence[Any]], uids: Sequence[Any], prompts: Batch | None = None
    ) -> list[list[Any]]:
        """Each row's images decoded; relative paths from the row's data file (``prompts``)."""
        with_dirs = prompts is not None and DATA_DIR in prompts.non_tensor_keys
        folders = prompts[DATA_DIR] if with_dirs else [None] * len(rows)
        return [
            [
                decode_image(item, f"prompt {uid}, image {j}", row_base({DATA_DIR: folder}))
                for j, item in enumerate(items)
            ]
            for uid, items, folder in zip(uids, rows, folders, strict=True)
        ]

    def encode(self, prompts: Batch) -> dict[str, Any]:
        """The processor's model inputs of ``prompts``' texts and images (left-padded); token-in
        prompts (no ``rendered_prompt``: ``input_ids`` with expanded image tokens) keep their
        ids and get their images' pixels."""
        uids = prompts["uid"] if "uid" in prompts.non_tensor_keys else range(len(prompts))
        # No images column is no image in any row: text-only files (a run's validation files
        # beside image train files) batch without one; an '<image>' left in such a prompt is
        # refused by the processor's placeholder count.
        column = prompts[IMAGES] if IMAGES in prompts.non_tensor_keys else [None] * len(prompts)
        rows = [image_list(value, f"row {uid}") for uid, value in zip(uids, column, strict=True)]
        if PROMPT_TEXT not in prompts.non_tensor_keys and "input_ids" in prompts.tensor_keys:
            return {
                "input_ids": prompts["input_ids"],
                "attention_mask": prompts["attention_mask"],
                **self.processor.encode_image_rows(self._decoded(rows, uids, prompts)),
            }
        if PROMPT_TEXT not in prompts.non_tensor_keys:
            raise HfsdkError(
                f"rollout.backend={BACKEND} needs a prompt column {PROMPT_TEXT!r} but the prompts "
                f"have {sorted(prompts.non_tensor_keys)}; load a dataset in verl's "
                "multimodal layout ('prompt' with '<image>', 'images')"
            )
        texts = [expand_placeholders(str(text)) for text in prompts[PROMPT_TEXT]]
        images = self._decoded(rows, uids, prompts)
        # The loader bounded the text (data.max_prompt_length); each image adds its tokens.
        return self.processor(texts, images)

    def image_prompts(self, prompts: Batch) -> Batch:
        """``prompts`` as token ids: ``input_ids``/``attention_mask`` with each ``<image>``
        expanded to its image tokens (left-padded); the non-tensor columns as they were."""
        encoded = self.encode(prompts)
        return Batch.from_dict(
            tensors={k: encoded[k] for k in ("input_ids", "attention_mask")},
            non_tensors={k: prompts[k] for k in prompts.non_tensor_keys},
            meta=dict(prompts.meta),
        )

    def row_images(self, row: Mapping[str, Any]) -> list[Any]:
        """The row's ``images`` column (verl's items), in the order of its placeholders;
        relative paths made absolute from the row's data file."""
        base = row_base(row)
        items = image_list(row.get(IMAGES), f"row {row.get('uid', '?')}")
        return [resolved_item(item, base) for item in items]

    def image_text(self, image: Any) -> str:
        """The vision span of ``image`` with as many pad tokens as it has vision features."""
        grids = self.processor.encode_images([decode_image(image, "a tool's image")])
        features = int(grids["image_grid_thw"][0].prod()) // self.processor.merge_size**2
        return VISION_START + IMAGE_PAD * features + VISION_END

    def with_images(self, batch: Batch, images: Sequence[Sequence[Any]]) -> Batch:
        """``batch`` (an assembled multi-turn rollout) with each row's ``images`` as per-row
        image columns and ``meta[MODEL_INPUTS]``; the image-token invariant checked on it."""
        uids = batch["uid"] if "uid" in batch.non_tensor_keys else range(len(batch))
        vision = self.processor.encode_image_rows(self._decoded(images, uids))
        config = self.actor.hf_config
        check_image_tokens(
            batch["input_ids"],
            vision["image_grid_thw"],
            vision["images_per_row"],
            image_token_id=config.image_token_id,
            merge_size=self.processor.merge_size,
            attention_mask=batch["attention_mask"],
        )
        images_columns = self._image_columns(
            vision["pixel_values"], vision["image_grid_thw"], vision["images_per_row"]
        )
        for key, value in images_columns.items():
            batch.tensors[key] = value
        batch.meta[MODEL_INPUTS] = MODEL_INPUTS_NAME
        return batch

    def generate_sequences(
        self, prompts: Batch, *, n: int | None = None, greedy: bool | None = None
    ) -> Batch:
        """Responses for ``prompts``: the contract's output batch, the image columns and
        ``rollout_log_probs``; ``meta[MODEL_INPUTS]`` names the forward's image entry."""
        import torch

        n = int(n if n is not None else prompts.meta.get("n", self.config.n))
        # temperature 0 is greedy also when the caller asks to sample (the trainer's batches
        # carry meta greedy=False): sampling at temperature 0 raises in transformers.
        asked = greedy if greedy is not None else prompts.meta.get("greedy", False)
        greedy = bool(asked) or self.config.temperature == 0
        encoded = self._agreed_prompt_width(self.encode(prompts))
        width = self.config.max_response_length
        held = self._held
        with contextlib.nullcontext(held) if held is not None else self._weights.module() as module:
            rollout = sample(
                module,
                encoded,
                n=n,
                share_image_encoding=self.config.share_image_encoding,
                max_new_tokens=width,
                temperature=self.config.temperature if not greedy else 1.0,
                do_sample=not greedy,
            )
        pad = self.actor.tokenizer.pad_token_id
        responses = torch.full((len(rollout.responses), width), pad, dtype=torch.long)
        responses[:, : rollout.responses.shape[1]] = rollout.responses
        log_probs = torch.zeros(responses.shape, dtype=torch.float32)
        log_probs[:, : rollout.log_probs.shape[1]] = rollout.log_probs
        prompt_width = encoded["input_ids"].shape[1]
        repeated = Batch.from_dict(
            tensors={
                "input_ids": rollout.input_ids[:, :prompt_width],
                "attention_mask": rollout.attention_mask[:, :prompt_width],
            },
            non_tensors={
                k: [v for v in prompts[k] for _ in range(n)] for k in prompts.non_tensor_keys
            },
        )
        out = assemble_rollout(
            repeated,
            responses,
            tokenizer=self.actor.tokenizer,
            eos_ids=self.eos_ids,
            temperature=1.0 if greedy else self.config.temperature,
            greedy=greedy,
            extra={"rollout_log_probs": log_probs},
        )
        images = self._image_columns(
            rollout.pixel_values, rollout.image_grid_thw, rollout.images_per_row
        )
        for key, value in images.items():
            out.tensors[key] = value
        out.meta[MODEL_INPUTS] = MODEL_INPUTS_NAME
        return out

    def _agreed_prompt_width(self, encoded: dict[str, Any]) -> dict[str, Any]:
        """``encoded`` left-padded to the widest data-parallel rank's prompts (collective), so
        the ranks' sequences concatenate whatever each rank's texts and images expand to.
        Inside :meth:`serving` calls are this rank's alone: no agreement there."""
        dp = self.actor.dp
        if dp.size <= 1 or self._held is not None:
            return encoded
        (widest,) = agreed_widths((int(encoded["input_ids"].shape[1]),), dp.group)
        pad = self.actor.tokenizer.pad_token_id
        return {**encoded, **left_padded(encoded, widest, pad)}

    def _image_columns(self, pixel_values: Any, grids: Any, per_row: Any) -> dict[str, Any]:
        """Per-row image columns as wide as the widest data-parallel rank's (collective), so
        the ranks' outputs concatenate whatever images each drew. Inside :meth:`serving` calls
        are this rank's alone (a multi-turn step's turns): no agreement there."""
        dp = self.actor.dp
        group = dp.group if dp.size > 1 and self._held is None else None
        widths = agreed_widths(row_widths(grids, per_row), group)
        return per_row_images(pixel_values, grids, per_row, widths)

    @contextlib.contextmanager
    def serving(self) -> Iterator[None]:
        """Hold the module with the actor's weights for a run of calls (a multi-turn step):
        collective once on entry, so ranks may then make different numbers of calls. Reentrant."""
        if self._held is not None:
            yield
            return
        with self._weights.module() as module:
            self._held = module
            try:
                yield
            finally:
                self._held = None

    def update_weights(self, actor: ActorSource) -> None:
        """Nothing to do: every call reads the actor's current weights."""


def left_padded(encoded: Mapping[str, Any], width: int, pad_id: int) -> dict[str, Any]:
    """``input_ids`` (``pad_id``) and ``attention_mask`` (0) of ``encoded`` left-padded to
    ``width`` columns; the padding is masked, so positions and image tokens are unchanged."""
    import torch.nn.functional as F

    extra = width - int(encoded["input_ids"].shape[1])
    return {
        "input_ids": F.pad(encoded["input_ids"], (extra, 0), value=pad_id),
        "attention_mask": F.pad(encoded["attention_mask"], (extra, 0), value=0),
    }
