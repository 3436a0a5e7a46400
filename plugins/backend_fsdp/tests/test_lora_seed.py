"""What seeds a LoRA actor's adapters: ``actor.seed``, whatever else the process drew.

The engine gets no ``trainer.seed`` (its worker seeds torch per rank, which the adapters
must not follow: every rank needs the same ones), so ``actor.seed`` is the adapters' seed,
and its help says so (it used to name only the mini-batch shuffle).
"""

from __future__ import annotations

from pathlib import Path

import torch

from hfsdk.core.config.help import field_help
from hfsdk_backend_common.lora_config import LoraConfig
from hfsdk_backend_fsdp.actor import ActorEngine
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig

LORA = LoraConfig(rank=4, alpha=8.0, target_modules=("q_proj", "v_proj"))


def _lora_a(model_dir: Path, seed: int, torch_seed: int) -> dict[str, torch.Tensor]:
    torch.manual_seed(torch_seed)  # what the worker does with trainer.seed and its rank
    config = FSDPRoleConfig(model_path=str(model_dir), lora=LORA, seed=seed)
    actor = ActorEngine(config, role="actor")
    return {k: v.detach().clone() for k, v in actor.module.named_parameters() if "lora_A" in k}


def test_the_adapters_follow_actor_seed_alone(model_dir: Path) -> None:
    first = _lora_a(model_dir, seed=0, torch_seed=0)
    again = _lora_a(model_dir, seed=0, torch_seed=1000)  # another rank's stream
    other = _lora_a(model_dir, seed=1, torch_seed=0)
    assert all(torch.equal(first[k], again[k]) for k in first)
    assert all(not torch.equal(first[k], other[k]) for k in first)


def test_the_seed_help_names_the_adapters() -> None:
    (seed,) = [f for f in field_help(FSDPRoleConfig) if f.name == "seed"]
    assert "LoRA" in seed.help and "shuffle" in seed.help
