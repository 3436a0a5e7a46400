"""What a megatron actor's ``hf`` rollout holds per rank, against the 3D-HybridEngine's bound.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/megatron_rollout_memory.py
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/megatron_rollout_memory.py --layers 2

Two gloo ranks hold a megatron-core actor at tp=2 (a randomly initialised
Llama, hidden 512, 8 heads of 64, the default task's tokenizer); the rollout is
built through ``hfsdk.build_rollout`` and decodes once, greedily. Per path:

- ``shards tg=1`` / ``shards tg=2``: the 3D-HybridEngine (reshard, decode, drop);
- ``hf_weights``: ``rollout.decoder: transformers`` — one layer gathered over
  tp at a time into a weightless generation module on the collecting rank,
  freed after the call.

Columns (MB, max over ranks): the training shard, the generation shard
(``shards``: this rank's slice at tg; ``hf_weights``: the whole model, on the
collector only, during the call), one layer, the transition's peak extra
(``perf/reshard_peak_extra_bytes``: for ``hf_weights`` the largest piece in
flight, beside the generation module it fills), and whether any HF module with
weights is held after the call. The bound of the 3D-HybridEngine is
peak extra <= generation shard + one layer.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch
from megatron_vllm import build_model  # the same benchmark model (benchmarks/ is on sys.path)

MB = 2**20
HERE = str(Path(__file__).parent)


def rank_main(rank: int, world: int, path: str, tg: int, decoder: str) -> dict[str, Any]:
    """One rank: build the actor and the rollout, decode once, report what was held."""
    from transformers import PreTrainedModel

    from hfsdk import Batch, build_rollout
    from hfsdk_backend_common.hybrid.layout_config import RolloutLayoutConfig
    from hfsdk_backend_common.rollout_config import HFRolloutConfig
    from hfsdk_backend_megatron.engine import MegatronEngine
    from hfsdk_backend_megatron.megatron_config import MegatronRoleConfig, ParallelConfig

    config = MegatronRoleConfig(
        model_path=path,
        device="cpu",
        parallel=ParallelConfig(tp=2),
        rollout_layout=RolloutLayoutConfig(tp=tg),
    )
    engine = MegatronEngine(config, role="actor", kind="actor")
    rollout = build_rollout(HFRolloutConfig(max_response_length=8, decoder=decoder), engine)
    ids = torch.randint(3, 20, (4, 8))
    out = rollout.generate_sequences(
        Batch.from_dict(tensors={"input_ids": ids, "attention_mask": torch.ones_like(ids)}),
        greedy=True,
    )
    held = [
        name
        for obj in (engine, rollout)
        for name, value in vars(obj).items()
        if isinstance(value, PreTrainedModel)
        and any(p.device.type != "meta" for p in value.parameters())
    ]
    train = sum(p.numel() * p.element_size() for p in engine.model.parameters())
    layer = sum(
        p.numel() * p.element_size()
        for n, p in engine.model.named_parameters()
        if n.startswith("decoder.layers.0.")
    )
    shards = rollout.shards
    if shards is not None:
        generation = shards.hybrid.stats.generation_bytes
    else:
        generation = (
            sum(p.numel() * p.element_size() for p in rollout._module.parameters())
            if engine.dp.collects
            else 0
        )
    metrics = out.meta.get("rollout_metrics", {})
    return {
        "train": train,
        "generation": generation,
        "layer": layer * 2,  # a whole layer (both tp halves) is what a gather holds
        "peak": metrics.get("perf/reshard_peak_extra_bytes", 0.0),
        "held": held,
    }


def main() -> None:
    """Each path on two ranks; print the table."""
    from hfsdk_backend_common.testing.launch import run_gloo

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=8)
    args = parser.parse_args()
    cases = [
        ("shards tg=1", 1, "auto"),
        ("shards tg=2", 2, "auto"),
        ("hf_weights", 2, "transformers"),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        path = build_model(Path(tmp) / "model", args.layers)
        print("| path | training shard MB | generation shard MB | one layer MB | peak extra MB "
              "| HF module held after |")  # fmt: skip
        print("|---|---|---|---|---|---|")
        for name, tg, decoder in cases:
            kwargs = {"path": str(path), "tg": tg, "decoder": decoder}
            rows = run_gloo(
                2, "megatron_rollout_memory:rank_main", kwargs, path=[HERE], timeout=900
            )
            worst = {k: max(r[k] for r in rows) for k in ("train", "generation", "layer", "peak")}
            held = sorted({h for r in rows for h in r["held"]}) or "none"
            print(
                f"| {name} | {worst['train'] / MB:.1f} | {worst['generation'] / MB:.1f} | "
                f"{worst['layer'] / MB:.1f} | {worst['peak'] / MB:.1f} | {held} |"
            )


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    main()
