"""A tiny Qwen2-VL built locally from a config: its tokenizer, image processor and weights.

Everything comes from transformers' own classes (``Qwen2VLConfig``,
``Qwen2VLForConditionalGeneration``, ``Qwen2VLImageProcessorPil``, ``Qwen2VLProcessor``) and a
word-level tokenizer trained here that carries the vision special tokens, so a directory
built by :func:`save_tiny_vlm` loads back with ``from_pretrained`` and nothing is downloaded.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from hfsdk_tasks import build_once, holds
from hfsdk_vision.processor import VisionProcessor
from hfsdk_vision.tokens import VISION_TOKENS

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast, Qwen2VLForConditionalGeneration

PAD_TOKEN = "<pad>"
BOS_TOKEN = "<s>"
EOS_TOKEN = "</s>"
UNK_TOKEN = "<unk>"


@attrs.frozen(kw_only=True)
class TinyVLMSpec:
    """The shape of the tiny vision-language model (a Qwen2-VL with a few small layers).

    ``image_size`` is the side of the square images its processor is pinned to: with
    ``patch_size`` 14 and ``merge_size`` 2 a 56 px image is a 4×4 patch grid and 4 features.
    ``mrope_section`` splits the text attention head's rotary half-dimension between the
    temporal, height and width position streams, so it sums to ``hidden_size / heads / 2``.
    """

    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 2
    intermediate_size: int = 128
    vision_depth: int = 1
    vision_embed_dim: int = 32
    vision_heads: int = 2
    patch_size: int = 14
    merge_size: int = 2
    temporal_patch_size: int = 2
    image_size: int = 56
    mrope_section: tuple[int, int, int] = (4, 6, 6)
    max_position_embeddings: int = 256
    seed: int = 0

    def __attrs_post_init__(self) -> None:
        half = self.hidden_size // self.num_heads // 2
        if sum(self.mrope_section) != half:
            raise ValueError(
                f"mrope_section {self.mrope_section} sums to {sum(self.mrope_section)}, but the "
                f"text head's rotary half-dimension is {half} (hidden_size / num_heads / 2); "
                "choose sections that sum to it"
            )
        if self.image_size % (self.patch_size * self.merge_size):
            raise ValueError(
                f"image_size={self.image_size} is not a multiple of patch_size × merge_size "
                f"({self.patch_size * self.merge_size}); choose a multiple"
            )

    @property
    def features_per_image(self) -> int:
        """Image tokens (= vision features after merging) of one ``image_size`` image."""
        side = self.image_size // self.patch_size
        return side * side // (self.merge_size**2)

    def cache_key(self, corpus: Sequence[str]) -> str:
        """A short hash of the spec and the tokenizer corpus."""
        payload = json.dumps({"spec": attrs.asdict(self), "corpus": list(corpus)}, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]


def train_tokenizer(corpus: Sequence[str], max_length: int = 256) -> PreTrainedTokenizerFast:
    """A word-level tokenizer trained on ``corpus`` whose vision tokens are special tokens.

    Special tokens are matched before whitespace splitting, so ``<|vision_start|><|image_pad|>``
    written without spaces is still two tokens (the processor writes them that way).
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = [PAD_TOKEN, BOS_TOKEN, EOS_TOKEN, UNK_TOKEN, *VISION_TOKENS]
    tokenizer = Tokenizer(models.WordLevel(unk_token=UNK_TOKEN))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    trainer = trainers.WordLevelTrainer(special_tokens=specials, min_frequency=1)
    tokenizer.train_from_iterator(list(corpus), trainer)
    tokenizer.decoder = decoders.WordPiece(cleanup=False)
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=BOS_TOKEN,
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        unk_token=UNK_TOKEN,
        additional_special_tokens=list(VISION_TOKENS),
        padding_side="left",
        model_max_length=max_length,
    )


def build_processor(tokenizer: PreTrainedTokenizerFast, spec: TinyVLMSpec) -> VisionProcessor:
    """The processor over ``tokenizer`` whose image processor resizes every image to
    ``spec.image_size`` square (min = max pixels), so each image has the same feature count."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorPil,
    )

    pixels = spec.image_size * spec.image_size
    image_processor = Qwen2VLImageProcessorPil(
        patch_size=spec.patch_size,
        merge_size=spec.merge_size,
        temporal_patch_size=spec.temporal_patch_size,
        size={"shortest_edge": pixels, "longest_edge": pixels},
    )
    return VisionProcessor(image_processor, tokenizer)


def model_config(tokenizer: PreTrainedTokenizerFast, spec: TinyVLMSpec) -> Any:
    """The ``Qwen2VLConfig`` of the tiny model, its special token ids taken from ``tokenizer``."""
    from transformers import Qwen2VLConfig

    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in VISION_TOKENS}
    text = {
        "vocab_size": len(tokenizer),
        "hidden_size": spec.hidden_size,
        "intermediate_size": spec.intermediate_size,
        "num_hidden_layers": spec.num_layers,
        "num_attention_heads": spec.num_heads,
        "num_key_value_heads": spec.num_heads,
        "max_position_embeddings": spec.max_position_embeddings,
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": 10000.0,
            "mrope_section": list(spec.mrope_section),
        },
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
    }
    vision = {
        "depth": spec.vision_depth,
        "embed_dim": spec.vision_embed_dim,
        "hidden_size": spec.hidden_size,
        "num_heads": spec.vision_heads,
        "mlp_ratio": 2,
        "patch_size": spec.patch_size,
        "spatial_merge_size": spec.merge_size,
        "temporal_patch_size": spec.temporal_patch_size,
    }
    return Qwen2VLConfig(
        text_config=text,
        vision_config=vision,
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=False,
    )


def build_model(
    tokenizer: PreTrainedTokenizerFast, spec: TinyVLMSpec
) -> Qwen2VLForConditionalGeneration:
    """A freshly initialised tiny Qwen2-VL (seeded by ``spec.seed``, float32, eval mode)."""
    import torch
    from transformers import Qwen2VLForConditionalGeneration

    with torch.random.fork_rng():
        torch.manual_seed(spec.seed)
        model = Qwen2VLForConditionalGeneration(model_config(tokenizer, spec))
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    return model.eval()


def save_tiny_vlm(directory: str | Path, corpus: Sequence[str], spec: TinyVLMSpec) -> Path:
    """Build the tokenizer, processor and model and save all three into ``directory``."""
    directory = Path(directory)
    tokenizer = train_tokenizer(corpus, spec.max_position_embeddings)
    processor = build_processor(tokenizer, spec)
    model = build_model(tokenizer, spec)
    model.save_pretrained(directory)
    processor.save_pretrained(directory)
    return directory


def load_tiny_vlm(directory: str | Path) -> tuple[Qwen2VLForConditionalGeneration, VisionProcessor]:
    """The model (float32, eval mode) and processor saved in ``directory``."""
    from transformers import Qwen2VLForConditionalGeneration

    model = Qwen2VLForConditionalGeneration.from_pretrained(str(directory)).eval()
    return model, VisionProcessor.from_pretrained(directory)


def ensure_tiny_vlm(
    corpus: Sequence[str], spec: TinyVLMSpec | None = None, cache_dir: str | Path | None = None
) -> Path:
    """The directory of the tiny model for ``corpus`` and ``spec``, built once and then read
    from ``cache_dir`` (default: hfsdk's cache root, ``$HFSDK_CACHE_DIR``) under ``vision/``
    (:func:`hfsdk_tasks.build_once`)."""
    from hfsdk import cache_root

    spec = spec or TinyVLMSpec()
    base = (Path(cache_dir).expanduser() if cache_dir else cache_root()) / "vision"
    final = base / f"tiny_qwen2_vl-{spec.cache_key(corpus)}"
    return build_once(
        final,
        lambda staging: save_tiny_vlm(staging, corpus, spec),
        complete=holds("model.safetensors"),
    )
