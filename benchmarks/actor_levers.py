"""What each throughput lever of the fsdp actor saves, measured in one process.

    .venv/bin/python benchmarks/actor_levers.py --task compute --repeats 3

Builds the task's model (``--task compute``: the ~30M-parameter Llama of
``compute_bound_task.py``; ``default``: the default task's tiny model),
samples one GRPO step's batch (8 prompts x 4 samples for compute, 16 x 4
for default), then times ``compute_log_prob`` (the old- and reference-log-prob
passes) and ``update_actor`` (one optimizer step over the whole batch in one
micro-batch) with the levers switched on one after the other:

1. ``baseline``: one intra-op thread, logits for every position, padding
   columns kept, entropy with a graph (what hfsdk did before issue 10);
2. ``+response logits``: the LM head on response positions only;
3. ``+trim padding``: all-padding columns dropped per micro-batch;
4. ``+detached entropy``: the entropy computed without a graph;
5. ``+threads``: every core of the process (what a lone worker now gets).
   Measured last and apart: on a machine whose cores are busy with other
   work, several OpenMP threads wait for each other and can be much slower
   than one (check the load average printed with the table).
6. ``+torch.compile``: the fsdp option ``compile: true`` (inductor) on top. Its
   first passes compile; they run once before the clock and their time is
   printed apart.
7. ``+threads, packed``: variant 5 with ``packing: true`` (each micro-batch as one
   padding-free row, a block-diagonal mask) instead of trimming columns.

Skipping the old-log-prob pass (exactly on-policy updates) saves one whole
``compute_log_prob``. Variants are run round-robin ``--repeats`` times and the
median is printed, with the load average (the machine may be shared).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

VARIANTS = (
    "baseline",
    "+response logits",
    "+trim padding",
    "+detached entropy",
    "+threads",
    "+torch.compile",
    "+threads, packed",
)


def build(task: str, workdir: Path) -> tuple[str, list[str], int, int]:
    """Model dir, prompts, samples per prompt and max new tokens of the task."""
    import json

    if task == "compute":
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from compute_bound_task import ensure_compute_bound_assets

        model_dir, train = ensure_compute_bound_assets(workdir / "compute_task")
        prompts, new_tokens = 8, 64
    else:
        from hfsdk_tasks import ensure_default_assets

        assets = ensure_default_assets()
        model_dir, train, prompts, new_tokens = assets.model_dir, assets.train_jsonl, 16, 8
    rows = [json.loads(line)["prompt"] for line in train.read_text().splitlines()[:prompts]]
    return str(model_dir), rows, 4, new_tokens


def main() -> None:
    """Time the variants and print a markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--task", choices=("compute", "default"), default="compute")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    from hfsdk.core.data.tokenizer_loading import load_tokenizer
    from hfsdk_backend_common.objectives import ActorObjective
    from hfsdk_backend_common.optim_config import OptimConfig
    from hfsdk_backend_common.rollout.hf_rollout import HFRollout
    from hfsdk_backend_common.rollout_config import HFRolloutConfig
    from hfsdk_backend_fsdp.actor import ActorEngine
    from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig
    from hfsdk_policy_losses.losses import ppo_clip_loss

    cores = torch.get_num_threads()
    with tempfile.TemporaryDirectory() as tmp:
        model_dir, prompts, n, new_tokens = build(args.task, Path(tmp))
        samples = len(prompts) * n
        config = FSDPRoleConfig(
            model_path=model_dir,
            mini_batch_size=samples,
            micro_batch_size=samples,
            optim=OptimConfig(lr=1e-6),
        )
        actor = ActorEngine(config, role="actor")
        tokenizer = load_tokenizer(model_dir)
        encoded = tokenizer(prompts, return_tensors="pt", padding=True)
        from hfsdk.core.batch import Batch

        prompt_batch = Batch.from_dict(
            tensors={"input_ids": encoded.input_ids, "attention_mask": encoded.attention_mask},
            non_tensors={"uid": [str(i) for i in range(len(prompts))]},
        )
        torch.manual_seed(0)
        rollout = HFRollout(HFRolloutConfig(max_response_length=new_tokens, n=n), actor)
        batch = rollout.generate_sequences(prompt_batch)
        batch["advantages"] = torch.randn(samples, 1) * batch["response_mask"]
        batch = batch.union(actor.compute_log_prob(batch))
        tokens = int(batch["attention_mask"].sum())

        compiled = torch.compile(actor.module)

        def configure(variant: str) -> ActorObjective:
            packed = variant == "+threads, packed"
            level = 4 if packed else VARIANTS.index(variant)
            actor.compute_module = compiled if level >= 5 else actor.module
            torch.set_num_threads(cores if level >= 4 else 1)
            actor._logits_to_keep = level >= 1
            actor.config = attrs_evolve(config, remove_padding=level >= 2, packing=packed)
            # A negligible bonus makes the entropy part of the graph, as before.
            return ActorObjective(policy_loss=ppo_clip_loss, entropy_coef=0 if level >= 3 else 1e-9)

        times: dict[str, dict[str, list[float]]] = {
            v: {"log_prob": [], "update": []} for v in VARIANTS
        }
        load = os.getloadavg()[0]
        objective = configure(VARIANTS[5])
        start = time.perf_counter()
        actor.compute_log_prob(batch)
        middle = time.perf_counter()
        actor.update_actor(batch, objective)
        warm_up = (middle - start, time.perf_counter() - middle)
        for _ in range(args.repeats):
            for variant in VARIANTS:
                objective = configure(variant)
                start = time.perf_counter()
                actor.compute_log_prob(batch)
                middle = time.perf_counter()
                actor.update_actor(batch, objective)
                end = time.perf_counter()
                times[variant]["log_prob"].append(middle - start)
                times[variant]["update"].append(end - middle)
        print(
            f"{args.task} task: {samples} samples, {tokens} tokens, {cores} cores, "
            f"median of {args.repeats}, load {load:.1f} -> {os.getloadavg()[0]:.1f}\n"
        )
        print("| variant | compute_log_prob s | update_actor s | log-prob + ref + update s |")
        print("|---|---:|---:|---:|")
        for variant in VARIANTS:
            lp = statistics.median(times[variant]["log_prob"])
            up = statistics.median(times[variant]["update"])
            print(f"| {variant} | {lp:.3f} | {up:.3f} | {2 * lp + up:.3f} |")
        lp = statistics.median(times[VARIANTS[3]]["log_prob"])
        up = statistics.median(times[VARIANTS[3]]["update"])
        print(f"| +detached entropy, skip old log-probs | (saved) | {up:.3f} | {lp + up:.3f} |")
        print(
            f"\ntorch.compile's first passes (before the clock): compute_log_prob "
            f"{warm_up[0]:.1f} s, update_actor {warm_up[1]:.1f} s"
        )


def attrs_evolve(config: object, **changes: object) -> object:
    """``attrs.evolve`` (imported here so the module docstring stays the first statement)."""
    import attrs

    return attrs.evolve(config, **changes)


if __name__ == "__main__":
    main()
