"""The export of a reference that shares a LoRA actor's base is that base model, loadable alone.

Before, it wrote nothing and named the model directory instead, so ``hfsdk export --role
reference`` left an empty folder behind a success.
"""

from __future__ import annotations

from pathlib import Path

import torch

from hfsdk_backend_common.lora_config import LoraConfig
from hfsdk_backend_common.optim_config import OptimConfig
from hfsdk_backend_fsdp.actor import ActorEngine
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig
from hfsdk_backend_fsdp.shared_base import BaseOfLoraActor

LORA = LoraConfig(rank=4, alpha=8.0, target_modules=("q_proj", "v_proj", "down_proj"))


def _log_probs(model_dir: Path, ids: torch.Tensor) -> torch.Tensor:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    with torch.no_grad():
        logits = model(input_ids=ids).logits.float()
    return torch.log_softmax(logits[:, :-1], -1).gather(-1, ids[:, 1:, None])[..., 0]


def test_the_shared_base_exports_as_the_base_model(model_dir: Path, tmp_path: Path) -> None:
    config = FSDPRoleConfig(model_path=str(model_dir), optim=OptimConfig(lr=2e-2), lora=LORA)
    actor = ActorEngine(config, role="actor")
    # Adapters that change the actor: the export must leave them out.
    with torch.no_grad():
        for name, param in actor.module.named_parameters():
            if "lora_B" in name:
                param.fill_(0.05)
    out = BaseOfLoraActor(actor).export_hf(tmp_path / "reference")
    assert out == tmp_path / "reference"
    assert (out / "config.json").is_file() and not (out / "adapter_config.json").exists()
    ids = torch.tensor([[1, 5, 9, 4, 7, 3, 8, 2, 6]])
    torch.testing.assert_close(
        _log_probs(out, ids), _log_probs(model_dir, ids), atol=1e-5, rtol=1e-5
    )
    from transformers import AutoTokenizer

    assert AutoTokenizer.from_pretrained(str(out)).vocab_size > 0
