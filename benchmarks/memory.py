"""Peak memory and tokens/s of one GRPO step per memory lever, beside the planner's estimate.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/memory.py --layers 24 --settings lora,all
    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/memory.py --shape 1.5B --settings all
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/memory.py --plan-only

The model is Qwen2.5-0.5B's shape (hidden 896, 14 heads / 2 key-value heads,
FFN 4864, vocabulary 151936, tied embeddings; ``--shape`` picks another Qwen2.5
size) with ``--layers`` blocks (default: the shape's own, 24 for the real 0.5B),
random weights, built locally — nothing is downloaded. Each
setting runs in a fresh process (so peaks do not mix): it builds the fsdp
actor and reference engines in float32 on the CPU, then runs one GRPO step on
``--prompts`` x ``--samples`` sequences: sampling (hf rollout), reference and
old log-probs, group advantages, one ``update_actor``. Settings:

- ``plain``: full fine-tuning;
- ``ckpt``: ``gradient_checkpointing``;
- ``packing``: ``packing``;
- ``lora``: ``lora.rank: 16`` (the reference is the actor with adapters off);
- ``all``: LoRA r16 + checkpointing + packing.

Reported per setting: resident bytes of each role after it is built
(``actor``/``reference``), the process's peak resident set above the bare
interpreter during the step (``/proc/self/status`` VmHWM, reset with
``clear_refs`` before the step), tokens/s over the step (prompt + response
tokens / wall seconds), and the planner's estimate
(:func:`hfsdk_planner.run_memory.run_memory`) for the same run config,
with its error. ``--plan-only`` prints, per setting, the largest Qwen2.5
shape the planner says fits this machine's memory.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SETTINGS = {
    "plain": {},
    "ckpt": {"gradient_checkpointing": True},
    "packing": {"packing": True},
    "lora": {"lora": 16},
    "all": {"lora": 16, "gradient_checkpointing": True, "packing": True},
}
QWEN25 = {  # name: (layers, hidden, heads, kv heads, ffn, tied)
    "0.5B": (24, 896, 14, 2, 4864, True),
    "1.5B": (28, 1536, 12, 2, 8960, True),
    "3B": (36, 2048, 16, 2, 11008, True),
    "7B": (28, 3584, 28, 4, 18944, False),
    "14B": (48, 5120, 40, 8, 13824, False),
}
VOCAB = 151936


def _rss(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    return 0


def _touch(module: Any) -> None:
    """Read every weight once: lazily mapped weight files become resident, as in a step."""
    import torch

    with torch.no_grad():
        for param in module.parameters():
            param.detach().sum()


def _reset_peak() -> None:
    # Writing 5 resets VmHWM (the peak resident set) to the current resident set.
    Path("/proc/self/clear_refs").write_text("5")


def build_model(directory: Path, layers: int, shape: str = "0.5B") -> Path:
    """A random Qwen2.5-shaped causal LM (and the default task's tokenizer) in ``directory``."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    from hfsdk import load_tokenizer
    from hfsdk_tasks import ensure_default_assets

    if (directory / "config.json").is_file():
        return directory
    _, hidden, heads, kv, ffn, tied = QWEN25[shape]
    tokenizer = load_tokenizer(ensure_default_assets().model_dir)
    config = Qwen2Config(
        vocab_size=VOCAB,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        intermediate_size=ffn,
        max_position_embeddings=4096,
        rope_theta=1_000_000.0,
        tie_word_embeddings=tied,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.bos_token_id,
    )
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(directory))
    tokenizer.save_pretrained(str(directory))
    return directory


def overrides(model: str, setting: str, args: argparse.Namespace) -> list[str]:
    """The run-config overrides of a setting (what the planner's estimate is made for)."""
    levers = SETTINGS[setting]
    rows = args.prompts * args.samples
    out = [
        f"actor.model_path={model}",
        f"reference.model_path={model}",
        f"data.batch_size={args.prompts}",
        f"algorithm.n_samples_per_prompt={args.samples}",
        f"actor.mini_batch_size={rows}",
        f"actor.micro_batch_size={args.micro}",
        f"reference.micro_batch_size={args.micro}",
        f"rollout.max_prompt_length={args.prompt_length}",
        f"data.max_prompt_length={args.prompt_length}",
        f"rollout.max_response_length={args.response_length}",
    ]
    if levers.get("lora"):
        out.append(f"actor.lora.rank={levers['lora']}")
    for key in ("gradient_checkpointing", "packing"):
        if levers.get(key):
            out += [f"actor.{key}=true", f"reference.{key}=true"]
    return out


def estimate(model: str, setting: str, args: argparse.Namespace, mean_length: int = 0) -> dict:
    """The planner's bytes for the setting: per role (resident, transient) and the pool total."""
    from hfsdk.core.config import load_run_config
    from hfsdk_planner.run_memory import run_memory

    config = load_run_config("grpo", None, overrides(model, setting, args))
    pools = run_memory(config, mean_sequence_length=mean_length)
    roles = {r.role: (r.memory.resident, r.memory.transient) for p in pools for r in p.roles}
    return {"roles": roles, "total": sum(p.total for p in pools)}


def child(args: argparse.Namespace) -> None:
    """One setting in this process: build the roles, run one GRPO step, print JSON."""
    import torch

    from hfsdk.core.batch import Batch
    from hfsdk_backend_common.lora_config import LoraConfig
    from hfsdk_backend_common.objectives import ActorObjective
    from hfsdk_backend_common.optim_config import OptimConfig
    from hfsdk_backend_common.rollout.hf_rollout import HFRollout
    from hfsdk_backend_common.rollout_config import HFRolloutConfig
    from hfsdk_backend_fsdp.actor import ActorEngine, ReferenceEngine
    from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig
    from hfsdk_backend_fsdp.shared_base import BaseOfLoraActor
    from hfsdk_grpo.advantages import compute_grpo_advantages
    from hfsdk_policy_losses.losses import ppo_clip_loss

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    levers = SETTINGS[args.setting]
    rows = args.prompts * args.samples
    common = {
        "model_path": args.model,
        "micro_batch_size": args.micro,
        "mini_batch_size": rows,
        "gradient_checkpointing": bool(levers.get("gradient_checkpointing")),
        "packing": bool(levers.get("packing")),
    }
    base = _rss("VmRSS")
    actor = ActorEngine(
        FSDPRoleConfig(
            **common, optim=OptimConfig(lr=1e-5), lora=LoraConfig(rank=levers.get("lora", 0))
        ),
        role="actor",
    )
    _touch(actor.module)
    after_actor = _rss("VmRSS")
    if actor.lora:
        reference: Any = BaseOfLoraActor(actor)
    else:
        reference = ReferenceEngine(FSDPRoleConfig(**common), role="reference")
        _touch(reference.module)
    after_reference = _rss("VmRSS")
    from hfsdk_tasks import ensure_default_assets

    train = ensure_default_assets().train_jsonl
    texts = [json.loads(x)["prompt"] for x in train.read_text().splitlines()[: args.prompts]]
    tokenizer = actor.tokenizer
    encoded = tokenizer(texts, return_tensors="pt", padding=True)
    prompts = Batch.from_dict(
        tensors={"input_ids": encoded.input_ids, "attention_mask": encoded.attention_mask},
        non_tensors={"uid": [f"p{i}" for i in range(len(texts))], "raw_prompt": texts},
    )
    rollout = HFRollout(
        HFRolloutConfig(max_response_length=args.response_length, n=args.samples), actor
    )
    phases: dict[str, int] = {}
    highest = [0]

    def phase(name: str, fn: Any, *a: Any) -> Any:
        # The peak above the resident set at the phase's start: what the phase added.
        _reset_peak()
        before = _rss("VmRSS")
        out = fn(*a)
        phases[name] = _rss("VmHWM") - before
        highest[0] = max(highest[0], _rss("VmHWM"))
        return out

    start = time.perf_counter()
    batch = phase("generation", rollout.generate_sequences, prompts)
    generated = time.perf_counter()
    batch = batch.union(phase("ref_log_prob", reference.compute_ref_log_prob, batch))
    old = phase("old_log_prob", actor.compute_log_prob, batch)
    batch = batch.union(old.select(["old_log_probs"]))
    mask = batch["response_mask"]
    rewards = torch.zeros(mask.shape)
    last = (mask.sum(-1).long() - 1).clamp(min=0)
    rewards[torch.arange(len(mask)), last] = torch.rand(len(mask))
    batch["advantages"] = compute_grpo_advantages(
        token_level_rewards=rewards, response_mask=mask, group_index=list(batch.non_tensors["uid"])
    ).advantages
    objective = ActorObjective(policy_loss=ppo_clip_loss, kl_estimator="k3", kl_loss_coef=0.04)
    phase("update", actor.update_actor, batch, objective)
    end = time.perf_counter()
    tokens = int(batch["attention_mask"].sum())
    print(
        "RESULT "
        + json.dumps(
            {
                "base": base,
                "actor": after_actor - base,
                "reference": after_reference - after_actor,
                "peak": highest[0] - base,
                "phases": phases,
                "tokens": tokens,
                "mean_length": tokens // len(batch),
                "seconds": end - start,
                "generation_s": generated - start,
                "params": sum(p.numel() for p in actor.module.parameters()),
            }
        )
    )


def plan_only(args: argparse.Namespace) -> None:
    """The largest Qwen2.5 shape each setting fits into this machine's memory, per the planner."""
    from hfsdk_planner.run_memory import host_memory_bytes

    total = float(args.memory_gib) * 2**30 if args.memory_gib else host_memory_bytes()
    print(f"memory budget: {total / 2**30:.1f} GiB")
    work = Path(args.workdir)
    fits: dict[str, str] = {}
    for name, (layers, *_rest) in QWEN25.items():
        directory = work / f"qwen25-{name}-config"
        _config_only(directory, name, layers)
        for setting in args.settings.split(","):
            need = estimate(str(directory), setting, args, mean_length=args.mean_length)["total"]
            if need <= total:
                fits[setting] = name
            print(f"{name:>5} {setting:>8}: planner {need / 2**30:6.1f} GiB")
    for setting in args.settings.split(","):
        print(f"largest that fits, {setting}: {fits.get(setting, 'none')}")


def _config_only(directory: Path, shape: str, layers: int) -> None:
    """A config.json of the shape (all the planner reads; no weights)."""
    _, hidden, heads, kv, ffn, tied = QWEN25[shape]
    directory.mkdir(parents=True, exist_ok=True)
    config = {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "vocab_size": VOCAB,
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "intermediate_size": ffn,
        "tie_word_embeddings": tied,
        "max_position_embeddings": 4096,
    }
    (directory / "config.json").write_text(json.dumps(config))


def main() -> None:
    """Run every setting in its own process and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=0, help="blocks (0: the shape's own)")
    parser.add_argument("--shape", default="0.5B", choices=sorted(QWEN25))
    parser.add_argument("--settings", default=",".join(SETTINGS))
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--samples", type=int, default=2)
    parser.add_argument("--micro", type=int, default=8)
    parser.add_argument("--prompt-length", type=int, default=64)
    parser.add_argument("--response-length", type=int, default=32)
    parser.add_argument("--mean-length", type=int, default=0)
    parser.add_argument("--memory-gib", type=float, default=0.0)
    parser.add_argument("--workdir", default=str(Path(tempfile.gettempdir()) / "hfsdk-memory"))
    parser.add_argument("--plan-only", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--setting", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    if args.plan_only:
        plan_only(args)
        return
    layers = args.layers or QWEN25[args.shape][0]
    model = build_model(
        Path(args.workdir) / f"qwen25-{args.shape}-{layers}l", layers, shape=args.shape
    )
    gib = 2**30
    print(
        f"Qwen2.5-{args.shape} shape, {layers} layers; {args.prompts}x{args.samples} sequences, "
        f"prompt <= {args.prompt_length}, response {args.response_length}, float32, CPU"
    )
    header = (
        f"{'setting':>8} | {'actor GiB (plan)':>16} | {'ref GiB (plan)':>14} | "
        f"{'run peak GiB':>12} | {'planner GiB':>11} | {'error':>6} | {'tokens/s':>8}"
    )
    print(header)
    for setting in args.settings.split(","):
        cmd = [sys.executable, "-W", "ignore", __file__, "--child", "--setting", setting,
               "--model", str(model), "--prompts", str(args.prompts), "--samples",
               str(args.samples), "--micro", str(args.micro), "--prompt-length",
               str(args.prompt_length), "--response-length", str(args.response_length)]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True)
        lines = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
        if proc.returncode or not lines:
            print(f"{setting:>8} failed: {proc.stderr[-800:]}")
            continue
        r = json.loads(lines[-1][len("RESULT ") :])
        mean = r["mean_length"] if SETTINGS[setting].get("packing") else 0
        planned = estimate(str(model), setting, args, mean_length=mean)
        ph = r["phases"]
        # A role's peak: what it holds once built plus the most one of its passes adds.
        actor_peak = r["actor"] + max(ph["generation"], ph["old_log_prob"], ph["update"])
        ref_peak = r["reference"] + ph["ref_log_prob"]
        plan_actor = sum(planned["roles"]["actor"])
        plan_ref = sum(planned["roles"]["reference"])
        measured = r["peak"]  # the whole run above the bare interpreter
        error = (planned["total"] - measured) / measured
        print(
            f"{setting:>8} | {actor_peak / gib:7.2f} ({plan_actor / gib:5.2f}) | "
            f"{ref_peak / gib:6.2f} ({plan_ref / gib:5.2f}) | {measured / gib:12.2f} | "
            f"{planned['total'] / gib:11.2f} | {error:+6.0%} | {r['tokens'] / r['seconds']:8.1f}"
        )
        print("         phases (GiB added): " + ", ".join(
            f"{k} {v / gib:.2f}" for k, v in ph.items()))  # fmt: skip


if __name__ == "__main__":
    main()
