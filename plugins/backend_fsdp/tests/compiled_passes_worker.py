"""The eager and the ``compile: true`` passes of ``test_throughput_levers.py`` (run as a script).

Runs in a fresh process, as torch.compile does in an FSDP worker: by the time
the heavy suite reaches the compile check, its pytest process has run Ray
drivers, HTTP servers and signal tests in-process, and once (in CI, on a CPU
not available here) the first ATen matmul after an inductor kernel never
returned there. Here a stall ends in a stack dump and a non-zero exit instead.
One intra-op thread keeps OpenMP out of the comparison; the check is about the
compiled graph's numbers.

Loads a pickled sampled batch, makes one log-prob pass and one update with an
eager and a compiled actor, and saves what the test compares.
"""

from __future__ import annotations

import argparse
import faulthandler
import sys
from pathlib import Path

import torch


def main() -> None:
    """Run both actors on the batch and save their outputs, metrics and weights."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--batch", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--stall-after", type=float, required=True)
    args = parser.parse_args()
    faulthandler.enable(file=sys.stderr)  # a native crash names the pass it happened in
    faulthandler.dump_traceback_later(args.stall_after, exit=True, file=sys.stderr)
    torch.set_num_threads(1)

    # The test's own actor settings, so its weight bound (from COMPARABLE's lr) holds here.
    from test_throughput_levers import COMPARABLE, _actor  # beside this script, on its sys.path
    from torch._dynamo.eval_frame import OptimizedModule
    from torch._dynamo.utils import counters

    from hfsdk_backend_common.objectives import ActorObjective
    from hfsdk_policy_losses.losses import ppo_clip_loss

    sampled = torch.load(args.batch, weights_only=False)
    objective = ActorObjective(policy_loss=ppo_clip_loss)
    eager = _actor(args.model, optim=COMPARABLE)
    compiled = _actor(args.model, optim=COMPARABLE, compile=True)
    graphs = counters["stats"]["unique_graphs"]
    out_eager, out_compiled = eager.compute_log_prob(sampled), compiled.compute_log_prob(sampled)
    result = {
        "compute_module_is_compiled": isinstance(compiled.compute_module, OptimizedModule),
        "eager_module_is_plain": eager.compute_module is eager.module,
        "new_graphs": counters["stats"]["unique_graphs"] - graphs,
        "out": {"eager": out_eager, "compiled": out_compiled},
    }
    batch = sampled.union(out_eager)
    result["metrics"] = {
        "eager": eager.update_actor(batch, objective),
        "compiled": compiled.update_actor(batch, objective),
    }
    result["weights"] = {
        name: {key: p.detach() for key, p in engine.module.named_parameters()}
        for name, engine in (("eager", eager), ("compiled", compiled))
    }
    faulthandler.cancel_dump_traceback_later()
    torch.save(result, args.out)


if __name__ == "__main__":
    main()
