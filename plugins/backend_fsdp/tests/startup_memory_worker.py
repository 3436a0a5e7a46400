"""One rank of the start-up memory check in ``test_startup_memory.py`` (run as a script).

Builds an FSDP actor engine over a gloo group of two and reports how much this
process's peak resident memory grew while the engine was built (model load,
sharding, broadcast), next to the full model's size.
"""

from __future__ import annotations

import argparse
import json
import resource
import threading
import time
from pathlib import Path

import torch
import torch.distributed as dist


def _rss_bytes() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * resource.getpagesize()


class PeakSampler:
    """Samples this process's resident memory every few milliseconds; keeps the maximum.

    ``ru_maxrss`` is useless here: importing torch and transformers already set a
    higher peak than the engine reaches.
    """

    def __init__(self) -> None:
        self.peak = _rss_bytes()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, _rss_bytes())
            time.sleep(0.002)

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss_bytes())


def main() -> None:
    """Run one rank."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=args.rank, world_size=2
    )
    from transformers import AutoConfig, AutoModelForCausalLM

    from hfsdk_backend_fsdp.actor import ActorEngine
    from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig

    # Import the model code and touch the allocator once, so only the engine is measured.
    with torch.device("meta"):
        AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(args.model))
    dist.barrier()
    before = _rss_bytes()
    with PeakSampler() as sampler:
        engine = ActorEngine(FSDPRoleConfig(model_path=str(args.model), device="cpu"), role="actor")
        dist.barrier()
    grown = sampler.peak - before
    full = sum(p.numel() * p.element_size() for p in engine.module.parameters())
    local = sum(p.to_local().numel() * p.element_size() for p in engine.module.parameters())
    (args.out / f"rank{args.rank}.json").write_text(
        json.dumps({"grown": grown, "full": full, "local": local})
    )
    # Every rank done before any tears down: rank 0 hosts the store the others still use.
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
