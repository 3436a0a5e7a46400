"""What verifying a vLLM reload costs: the read-back against the reload itself, per sync.

    .venv/bin/python benchmarks/vllm_sync_verify.py --model default --syncs 5
    .venv/bin/python benchmarks/vllm_sync_verify.py --model llama30m --syncs 3

Builds an fsdp actor and a ``vllm`` rollout on it (``default``: the default task's tiny
Llama, 2 layers of width 128; ``llama30m``: a random ~30M-parameter Llama, 8 layers of
width 512), then reloads the engine ``--syncs`` times (the actor's weights version
bumped each time, so every reload is a real one) and prints the median of the reload's
own time (``timing/vllm_reload_s``) and of what verification adds
(``timing/vllm_verify_s``: the bit sums of the streamed tensors and the engine's
read-back through its kernels), with the load average (the machine may be shared).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path


def _model_dir(kind: str, scratch: Path) -> Path | None:
    if kind == "default":
        return None
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from hfsdk_tasks import ensure_default_assets
    from hfsdk_tasks.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(ensure_default_assets().model_dir)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=512, intermediate_size=1408,
        num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=8,
        max_position_embeddings=256, pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
    )  # fmt: skip
    LlamaForCausalLM(config).save_pretrained(str(scratch))
    tokenizer.save_pretrained(str(scratch))
    return scratch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("default", "llama30m"), default="default")
    parser.add_argument("--syncs", type=int, default=5)
    args = parser.parse_args()
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")

    from hfsdk_backend_common.optim_config import OptimConfig
    from hfsdk_backend_fsdp.fsdp_backend import FSDPBackend
    from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig
    from hfsdk_rollout_vllm.vllm_config import VLLMRolloutConfig
    from hfsdk_rollout_vllm.vllm_rollout import VLLMRollout

    with tempfile.TemporaryDirectory() as scratch:
        model_dir = _model_dir(args.model, Path(scratch))
        config = FSDPRoleConfig(
            model_path=str(model_dir) if model_dir else None, device="cpu",
            optim=OptimConfig(lr=1e-3),
        )  # fmt: skip
        actor = FSDPBackend.create_engine("actor", config, kind="actor")
        rollout = VLLMRollout(VLLMRolloutConfig(max_response_length=8), actor)
        params = sum(p.numel() for p in actor.module.parameters())
        reload_s, verify_s = [], []
        for _ in range(args.syncs):
            actor.weights_version += 1
            rollout.update_weights(actor)
            reload_s.append(rollout.last_metrics["timing/vllm_reload_s"])
            verify_s.append(rollout.last_metrics["timing/vllm_verify_s"])
        rollout.close()
    reload_med, verify_med = statistics.median(reload_s), statistics.median(verify_s)
    print(f"model {args.model}: {params / 1e6:.1f}M parameters, {args.syncs} syncs")
    print(f"reload (median)       {reload_med * 1e3:8.1f} ms")
    print(f"verification (median) {verify_med * 1e3:8.1f} ms  (+{verify_med / reload_med:.0%})")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
