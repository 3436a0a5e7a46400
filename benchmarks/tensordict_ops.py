"""Row operations of ``Batch``: its per-key loops against TensorDict's own indexing, cat and split.

Each variant does the same work on the tensors of one batch (the non-tensor
columns are the same numpy code in every variant, so they are left out):

- ``loop``: what ``Batch`` does, one torch call per key, then ``TensorDict(..., batch_size)``;
- ``tensordict``: TensorDict's own ``td[a:b]``, ``td[index]``, ``torch.cat(tds)``, ``td.split``;
- ``dict``: the per-key loop into a plain ``dict`` (what dropping the dependency would cost).

Results are checked equal before anything is timed. tensordict is no longer an hfsdk
dependency, so install it first (``pip install tensordict``), then run:
``python benchmarks/tensordict_ops.py [--rows 256] [--width 1024] [--keys 12] [--repeat 200]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable

import torch

try:
    from tensordict import TensorDict
except ImportError:
    # hfsdk dropped the dependency (this comparison is why), so a plain install lacks it.
    print(
        "tensordict is not installed (it is not an hfsdk dependency): "
        "pip install tensordict to run this comparison",
        file=sys.stderr,
    )
    raise SystemExit(2) from None


def _batch(rows: int, width: int, keys: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    out = {}
    for i in range(keys):
        if i % 3 == 0:
            out[f"k{i}"] = torch.randint(0, 32000, (rows, width), generator=generator)
        elif i % 3 == 1:
            out[f"k{i}"] = torch.rand(rows, width, generator=generator)
        else:
            out[f"k{i}"] = torch.rand(rows, generator=generator)
    return out


def _time(fn: Callable[[], object], repeat: int) -> float:
    """Median microseconds of one call."""
    fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e6)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=256)
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--keys", type=int, default=12)
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    torch.set_num_threads(1)
    plain = _batch(args.rows, args.width, args.keys)
    td = TensorDict(plain, batch_size=[args.rows])
    rows = args.rows
    names = list(plain)  # iterating a TensorDict walks its rows, so its keys come from here
    positions = torch.randperm(rows, generator=torch.Generator().manual_seed(1))
    half = rows // 2
    parts = [td[:half], td[half:]]
    plain_parts = [{k: v[:half] for k, v in plain.items()}, {k: v[half:] for k, v in plain.items()}]

    def wrap(tensors: dict[str, torch.Tensor], length: int) -> TensorDict:
        return TensorDict(tensors, batch_size=[length])

    ops: dict[str, dict[str, Callable[[], object]]] = {
        "slice": {
            "loop": lambda: wrap({k: v[1 : rows - 1] for k, v in td.items()}, rows - 2),
            "tensordict": lambda: td[1 : rows - 1],
            "dict": lambda: {k: v[1 : rows - 1] for k, v in plain.items()},
        },
        "take": {
            "loop": lambda: wrap({k: v.index_select(0, positions) for k, v in td.items()}, rows),
            "tensordict": lambda: td[positions],
            "dict": lambda: {k: v.index_select(0, positions) for k, v in plain.items()},
        },
        "concat": {
            "loop": lambda: wrap({k: torch.cat([p.get(k) for p in parts], 0) for k in names}, rows),
            "tensordict": lambda: torch.cat(parts, 0),
            "dict": lambda: {k: torch.cat([p[k] for p in plain_parts], 0) for k in plain},
        },
        "split8": {
            "loop": lambda: [
                wrap({k: v[i : i + rows // 8] for k, v in td.items()}, rows // 8)
                for i in range(0, rows, rows // 8)
            ],
            "tensordict": lambda: td.split(rows // 8, 0),
            "dict": lambda: [
                {k: v[i : i + rows // 8] for k, v in plain.items()}
                for i in range(0, rows, rows // 8)
            ],
        },
    }
    for name, variants in ops.items():  # the same results before timing
        results = [variants[v]() for v in ("loop", "tensordict")]
        first, second = (r if isinstance(r, list | tuple) else [r] for r in results)
        assert len(first) == len(second), name
        for a, b in zip(first, second, strict=True):
            assert all(torch.equal(a.get(k), b.get(k)) for k in names), name
    table = {
        name: {variant: round(_time(fn, args.repeat), 1) for variant, fn in variants.items()}
        for name, variants in ops.items()
    }
    print(json.dumps({"rows": rows, "width": args.width, "keys": args.keys, "median_us": table}))
    for name, times in table.items():
        print(f"{name:8s} " + "  ".join(f"{v}={t:9.1f}us" for v, t in times.items()))


if __name__ == "__main__":
    main()
