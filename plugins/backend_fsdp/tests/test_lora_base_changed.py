"""A LoRA checkpoint records its frozen base; a resume on a base changed since is refused.

The checkpoint holds the adapters alone and the base is rebuilt from ``model_path``: a
base directory updated in place (a new revision, a rebuilt cache) used to be taken as is,
the adapters silently applied to other weights.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from hfsdk import HfsdkError
from hfsdk_backend_common.lora_config import LoraConfig
from hfsdk_backend_fsdp.actor import ActorEngine
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig

LORA = LoraConfig(rank=4, alpha=8.0, target_modules=("q_proj", "v_proj"))


def _actor(model_dir: Path) -> ActorEngine:
    return ActorEngine(FSDPRoleConfig(model_path=str(model_dir), lora=LORA), role="actor")


def _nudge_one_weight(model_dir: Path) -> None:
    """One element of one weight changed by one ulp, in place, as a new revision would."""
    from safetensors.torch import load_file, save_file

    path = model_dir / "model.safetensors"
    state = load_file(str(path))
    name = next(k for k, v in state.items() if v.dim() == 2)
    weight = state[name].clone()
    weight.view(-1)[7] = torch.nextafter(weight.view(-1)[7], torch.tensor(1e9, dtype=weight.dtype))
    save_file({**state, name: weight}, str(path), metadata={"format": "pt"})


def test_a_resume_on_a_changed_base_is_refused_in_one_line(model_dir: Path, tmp_path: Path) -> None:
    base = tmp_path / "base"
    shutil.copytree(model_dir, base)
    _actor(base).save_checkpoint(tmp_path / "step_1")
    _actor(base).load_checkpoint(tmp_path / "step_1")  # the same base: loads
    _nudge_one_weight(base)
    with pytest.raises(HfsdkError, match="trained on another base model") as caught:
        _actor(base).load_checkpoint(tmp_path / "step_1")
    assert "\n" not in str(caught.value) and "actor.model_path" in str(caught.value)


def test_a_resume_with_other_adapters_is_refused_naming_them(
    model_dir: Path, tmp_path: Path
) -> None:
    """The checkpoint's adapters loaded non-strictly: other target_modules or another alpha
    took them silently (adapters dropped, or rescaled), and the run went on."""
    import attrs

    _actor(model_dir).save_checkpoint(tmp_path / "step_1")
    for changed, fields in [
        (attrs.evolve(LORA, target_modules=("q_proj",)), "target_modules"),
        (attrs.evolve(LORA, alpha=64.0), "alpha"),
        (attrs.evolve(LORA, rank=8, alpha=64.0), "rank, alpha"),
        (LoraConfig(), "rank"),  # the full model from an adapter checkpoint
    ]:
        engine = ActorEngine(FSDPRoleConfig(model_path=str(model_dir), lora=changed), role="actor")
        with pytest.raises(HfsdkError, match=f"actor.lora's {fields} differ") as caught:
            engine.load_checkpoint(tmp_path / "step_1")
        assert "\n" not in str(caught.value)
    # Dropout is not part of the trained weights: it may change.
    ActorEngine(
        FSDPRoleConfig(model_path=str(model_dir), lora=attrs.evolve(LORA, dropout=0.1)),
        role="actor",
    ).load_checkpoint(tmp_path / "step_1")


def test_a_checkpoint_without_the_adapter_record_loads_as_before(
    model_dir: Path, tmp_path: Path
) -> None:
    from hfsdk_backend_fsdp.engine import DCP_DIR, EXTRA_FILE, LORA_CONFIG_KEY

    _actor(model_dir).save_checkpoint(tmp_path / "step_1")
    extra_path = tmp_path / "step_1" / DCP_DIR.format(role="actor") / EXTRA_FILE
    extra = torch.load(extra_path, weights_only=True)
    del extra[LORA_CONFIG_KEY]
    torch.save(extra, extra_path)
    _actor(model_dir).load_checkpoint(tmp_path / "step_1")
