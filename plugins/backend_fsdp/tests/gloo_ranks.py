"""Run a worker script on several gloo ranks over loopback: the test's launcher
(:func:`run_ranks`) and the worker's side (:func:`join_group`).

Every rank gets ``--rank R --world W --port P --inputs TMP/INPUTS --out TMP``; the
worker reads what the test saved at ``--inputs`` and writes its results under ``--out``.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch
import torch.distributed as dist


def free_port() -> int:
    """A loopback port nothing listens on (for the ranks' rendezvous)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_ranks(
    worker: Path,
    tmp_path: Path,
    *,
    world: int = 2,
    inputs: str = "inputs.pt",
    timeout: float = 120,
    env: Mapping[str, str] | None = None,
    python_args: Sequence[str] = (),
) -> None:
    """Run ``worker`` on ranks ``0..world-1`` at once (one thread each); every rank must
    exit 0, else the assertion shows the end of its output."""
    port = free_port()
    environment = {**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}
    ranks = [
        subprocess.Popen(
            [
                sys.executable,
                *python_args,
                str(worker),
                *("--rank", str(rank), "--world", str(world), "--port", str(port)),
                *("--inputs", str(tmp_path / inputs), "--out", str(tmp_path)),
            ],
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in range(world)
    ]
    for process in ranks:
        output, _ = process.communicate(timeout=timeout)
        assert process.returncode == 0, output[-3000:]


def join_group() -> argparse.Namespace:
    """In a worker: parse the launcher's arguments, take one torch thread and join the
    gloo group; the arguments (``rank``, ``world``, ``port``, ``inputs``, ``out``)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--inputs", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=args.rank, world_size=args.world
    )
    return args
