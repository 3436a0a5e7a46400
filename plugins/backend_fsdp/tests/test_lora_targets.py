"""Which layers LoRA adapts: the language model's linear layers only, checked before any worker.

Meta-device models and tiny random ones (no training): each refusal here used to pass the
preflight and fail at the first rollout (an embedding's or a tied LM head's adapter the
merge does not pair, a ``Conv3d`` without ``fan_in_fan_out``), or trained adapters inside
the vision tower ``actor.freeze_vision`` froze.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from hfsdk import HfsdkError
from hfsdk_backend_common.lora_config import LoraConfig
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig
from hfsdk_backend_fsdp.lora import _check_targets, attach_adapters, check_lora_targets


def _preflight(model_dir: Path, *targets: str) -> None:
    """The ``lora_targets`` preflight check of a run whose actor is ``model_dir`` with LoRA."""
    actor = FSDPRoleConfig(
        model_path=str(model_dir), lora=LoraConfig(rank=4, target_modules=targets)
    )
    check_lora_targets(SimpleNamespace(sections={"actor": actor}), None, None)


def _config_dir(tmp_path: Path, config: dict[str, object]) -> Path:
    """A model directory holding only ``config.json`` (the preflight reads no weights)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "config.json").write_text(json.dumps(config))
    return tmp_path


def _tiny_vlm_config() -> object:
    """A Qwen2-VL small enough to build on CPU in a blink (vision tower under ``model.visual``)."""
    from transformers import Qwen2VLConfig

    text = {
        "vocab_size": 64,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "mrope_section": [2, 3, 3]},
    }
    vision = {"depth": 1, "embed_dim": 16, "hidden_size": 32, "num_heads": 2, "mlp_ratio": 2}
    return Qwen2VLConfig(text_config=text, vision_config=vision, tie_word_embeddings=False)


@pytest.fixture
def vlm_dir(tmp_path: Path) -> Path:
    """The tiny Qwen2-VL's ``config.json``."""
    return _config_dir(tmp_path / "vlm", _tiny_vlm_config().to_dict())


def test_all_linear_puts_no_adapter_in_the_vision_tower() -> None:
    from transformers import Qwen2VLForConditionalGeneration

    model = Qwen2VLForConditionalGeneration(_tiny_vlm_config())
    wrapped = attach_adapters(model, LoraConfig(rank=4, target_modules=("all-linear",)), seed=0)
    adapted = {n.split(".lora_A")[0] for n, _ in wrapped.named_parameters() if "lora_A" in n}
    # Before: the tower's qkv, proj, fc1, fc2 and merger layers were adapted (and trained).
    assert adapted and not [n for n in adapted if "visual" in n]
    assert any(n.endswith("q_proj") for n in adapted)
    trainable = [n for n, p in wrapped.named_parameters() if p.requires_grad and "visual" in n]
    assert trainable == []


def test_a_target_only_the_vision_tower_has_is_refused_before_the_run(vlm_dir: Path) -> None:
    # Before: the preflight skipped image-text models; 'proj' then adapted the tower's
    # Conv3d patch embedding and the first generation failed on its missing fan_in_fan_out.
    with pytest.raises(HfsdkError, match=r"names 'proj', which only the vision tower has"):
        _preflight(vlm_dir, "q_proj", "proj")
    _preflight(vlm_dir, "q_proj", "v_proj")


def test_a_target_matching_a_non_linear_layer_is_refused() -> None:
    class Toy(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.attn = torch.nn.ModuleDict({"proj": torch.nn.Linear(2, 2)})
            self.patch = torch.nn.ModuleDict({"proj": torch.nn.Conv2d(2, 2, 1)})

    # Before: accepted (a Linear of that name exists); peft then adapted the Conv2d too,
    # whose adapter the merge into the rollout's weights does not handle.
    with pytest.raises(HfsdkError, match=r"names 'proj', which matches 'patch.proj' \(Conv2d\)"):
        _check_targets(Toy(), ["proj"])
    _check_targets(Toy(), ["attn.proj"])


def test_an_embedding_target_is_refused_before_the_run(model_dir: Path) -> None:
    # Before: listed as adaptable; the first rollout then met lora_embedding_A/B.
    with pytest.raises(HfsdkError, match=r"names 'embed_tokens', .*\(Embedding\); only Linear"):
        _preflight(model_dir, "q_proj", "embed_tokens")


def test_the_lm_head_of_a_tied_model_is_refused_and_of_an_untied_one_taken(
    model_dir: Path, tmp_path: Path
) -> None:
    config = json.loads((model_dir / "config.json").read_text())
    tied = _config_dir(tmp_path / "tied", {**config, "tie_word_embeddings": True})
    # Before: accepted; the first rollout failed with "LoRA modules without all of base, A and B".
    with pytest.raises(HfsdkError, match=r"the LM head 'lm_head', which shares its weight"):
        _preflight(tied, "q_proj", "lm_head")
    untied = _config_dir(tmp_path / "untied", {**config, "tie_word_embeddings": False})
    _preflight(untied, "q_proj", "lm_head")


def test_all_linear_beside_other_names_is_refused_on_its_own_line() -> None:
    # Before: the preflight said the model had no layer 'all-linear' "(or give ['all-linear'])".
    from hfsdk.core.config import load_run_config
    from hfsdk.core.errors import ConfigError

    with pytest.raises(ValueError, match=r"'all-linear' must be the only entry"):
        LoraConfig(rank=4, target_modules=("q_proj", "all-linear"))
    with pytest.raises(ConfigError, match=r"actor\.lora.*'all-linear' must be the only") as got:
        load_run_config("grpo", None, ["actor.lora.rank=4", "actor.lora.target_modules=[q_proj,all-linear]"])  # fmt: skip
    assert "\n" not in str(got.value) and "has no layer" not in str(got.value)
    LoraConfig(rank=4, target_modules=("all-linear",))  # alone: fine
