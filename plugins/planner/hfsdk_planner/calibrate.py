"""Measure this machine for the planner and write a cluster profile (``hfsdk calibrate``).

What the simulator assumes, measured on one device (the first GPU, or a CPU
device at each thread count a run's device may use: one, half the cores and
all of them, :func:`calibration_threads`; the profile's top level is one
thread's, ``by_threads`` the others', and the planner prices a run with the
figures of the threads its workers use):

* matmul throughput per dtype (float32, bfloat16): the best of a few square
  matmuls;
* memory bandwidth: a large tensor copy (read + write); on CPU also the
  total when every core copies at once (cores share the memory bus), and
  the rate of writing a fresh allocation (the OS maps each page on first touch);
* collective bandwidth and latency between two local processes: gloo on
  CPU, NCCL between two GPUs when there are two (one GPU: the preset's links),
  and how close an all-gather (FSDP's collective) comes to the ring bound;
* KV-cache decoding (transformers' ``generate`` on the model itself) on
  a small random Llama at a few batch sizes: its batch-1 step time gives the
  fixed per-layer overhead, its large batches the achieved fraction of the
  matmul peak in decode;
* a forward and a forward + backward of the same model (transformers Llama,
  what a transformers-based training backend runs): the achieved fractions in inference and
  training once the per-layer overhead is taken out.

* the training backend's fixed work per optimizer step, per training
  micro-batch and per inference micro-batch: short runs of the default task
  in process and on two worker processes
  (:mod:`hfsdk_planner.calibrate_backend`).

The result is a :class:`~hfsdk_planner.cluster.Cluster` whose
``efficiency`` holds the measured fractions; :meth:`Cluster.save` writes it as
YAML for ``--cluster FILE`` and ``placement.cluster: FILE``. ``quick=True``
shrinks every measurement (tests; a few seconds) at the price of noise.
"""

from __future__ import annotations

import os
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from hfsdk_planner.calibrate_backend import OVERHEADS, measure_backend
from hfsdk_planner.cluster import Cluster, a100_80gb, h100_80gb, h200_141gb, local
from hfsdk_planner.simulator import ADAM_BYTES


@attrs.frozen(kw_only=True)
class CalibrationSizes:
    """How big each measurement is (``quick`` ones for tests)."""

    matmul: tuple[int, ...] = (512, 1024)
    copy_bytes: int = 256 * 2**20
    collective_bytes: int = 16 * 2**20
    repeats: int = 5
    hidden: int = 256
    layers: int = 4
    vocab: int = 2048
    decode_batches: tuple[int, ...] = (1, 8, 64)
    decode_tokens: int = 16
    train_batch: int = 16
    train_length: int = 64
    call_rows: int = 64
    call_width: int = 96
    remote_calls: bool = True
    backend_runs: bool = True
    shared_copy_seconds: float = 2.0

    @classmethod
    def quick(cls) -> CalibrationSizes:
        """Seconds, not a minute: tiny sizes, noisy figures."""
        return cls(
            matmul=(128, 256),
            copy_bytes=16 * 2**20,
            collective_bytes=2**20,
            repeats=2,
            hidden=64,
            layers=2,
            vocab=256,
            decode_batches=(1, 16),
            decode_tokens=4,
            train_batch=4,
            train_length=16,
            call_rows=8,
            call_width=16,
            remote_calls=False,
            backend_runs=False,
            shared_copy_seconds=0.2,
        )


def calibration_threads(cores: int) -> tuple[int, ...]:
    """Thread counts per device a CPU calibration measures: one, half the cores (two
    devices' automatic share) and all of them (one device's); between them the planner
    interpolates (:meth:`Cluster.for_threads`). Two threads are not twice one: small
    matmuls and per-op dispatch gain little from a second thread."""
    return tuple(sorted({1, max(1, cores // 2), max(1, cores)}))


def measure_device(
    sizes: CalibrationSizes, device: Any, sync: Callable[[], None]
) -> tuple[dict[str, float], float, dict[str, Any]]:
    """Matmul peaks per dtype, copy bandwidth and the small model's steps on ``device``
    with the current torch thread count."""
    flops = measure_matmul(sizes, device, sync)
    bandwidth = measure_bandwidth(sizes, device, sync)
    model = measure_model(sizes, flops["float32"], bandwidth, device, sync)
    return flops, bandwidth, model


EFFICIENCY_KEYS = (
    "training_efficiency",
    "inference_efficiency",
    "prefill_efficiency",
    "decode_compute_efficiency",
    "decode_bandwidth_efficiency",
)


def thread_figures(flops: dict[str, float], bandwidth: float, model: dict[str, Any]) -> dict:
    """One thread count's entry of a profile's ``by_threads``."""
    return {
        "peak_flops": flops["float32"],
        "flops_by_dtype": dict(flops),
        "memory_bandwidth": bandwidth,
        "layer_overhead": model["layer_overhead"],
        "token_overhead": model["token_overhead"],
        "efficiency": {key: model[key] for key in EFFICIENCY_KEYS},
    }


def _best(fn: Callable[[], Any], repeats: int, sync: Callable[[], None]) -> float:
    """Fastest of ``repeats`` timed calls after one warm-up call (seconds)."""
    fn()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return min(times)


def measure_matmul(sizes: CalibrationSizes, device: Any, sync: Callable[[], None]) -> dict:
    """Best matmul FLOP/s per dtype (``float32``, ``bfloat16``)."""
    import torch

    out = {}
    for name, dtype in (("float32", torch.float32), ("bfloat16", torch.bfloat16)):
        best = 0.0
        for n in sizes.matmul:
            a = torch.randn(n, n, device=device, dtype=dtype)
            b = torch.randn(n, n, device=device, dtype=dtype)
            seconds = _best(lambda a=a, b=b: a @ b, sizes.repeats, sync)
            best = max(best, 2 * n**3 / seconds)
        out[name] = best
    return out


def measure_bandwidth(sizes: CalibrationSizes, device: Any, sync: Callable[[], None]) -> float:
    """Device memory bandwidth in bytes/s: a tensor copy reads and writes its bytes."""
    import torch

    src = torch.empty(sizes.copy_bytes // 4, dtype=torch.float32, device=device).uniform_()
    dst = torch.empty_like(src)
    seconds = _best(lambda: dst.copy_(src), sizes.repeats, sync)
    return 2 * sizes.copy_bytes / seconds


def measure_fresh_bandwidth(sizes: CalibrationSizes) -> float:
    """Bytes/s written into newly allocated CPU memory (first touch: the OS maps each page).

    Large CPU allocations come fresh from the OS and go back when freed, so a buffer
    allocated per step (a generation module's weights) is written at this rate, not at
    the copy bandwidth; a GPU's caching allocator reuses its memory (not measured there).
    """
    import torch

    count = sizes.copy_bytes // 4
    seconds = _best(lambda: torch.empty(count).fill_(1.0), sizes.repeats, lambda: None)
    return sizes.copy_bytes / seconds


def measure_shared_bandwidth(sizes: CalibrationSizes, devices: int) -> float | None:
    """Total copy bandwidth (bytes/s) of ``devices`` single-thread processes copying at once.

    CPU cores share the memory bus: each process copies for the same stretch
    of time, the sum of their rates is the node's. ``None`` when they fail.
    """
    import subprocess

    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    args = [str(sizes.copy_bytes), str(sizes.shared_copy_seconds)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "hfsdk_planner.workers.copy_worker", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        for _ in range(devices)
    ]
    try:
        outputs = [p.communicate(timeout=120)[0] for p in procs]
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        return None
    if any(p.returncode for p in procs):
        return None
    return sum(float(out.strip().splitlines()[-1]) for out in outputs)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@attrs.frozen
class Links:
    """What the collectives between two local processes achieved."""

    bandwidth: float
    """Bytes/s of an all-reduce's ring (two ranks move the buffer once per rank)."""
    latency: float
    """Seconds of a two-float all-reduce."""
    gather_efficiency: float
    """An all-gather's fraction of the ring bound at that bandwidth (gloo on a CPU here:
    0.4-0.8, as it copies what a ring would only forward)."""


def measure_collectives(sizes: CalibrationSizes, backend: str) -> Links | None:
    """Bandwidth and latency of an all-reduce, and an all-gather's efficiency, between two
    local processes; ``None`` when the processes fail."""
    import json
    import subprocess

    port = str(_free_port())
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    args = [str(sizes.collective_bytes), str(sizes.repeats), backend]
    module = "hfsdk_planner.workers.collective_worker"
    procs: list[subprocess.Popen] = []
    try:
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", module, str(rank), port, *args],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
            for rank in range(2)
        ]
        outputs = [p.communicate(timeout=120) for p in procs]
    except (OSError, subprocess.TimeoutExpired):
        for p in procs:
            p.kill()
        return None
    if any(p.returncode for p in procs):
        return None
    result = json.loads(outputs[0][0].strip().splitlines()[-1])
    latency = result["small"]
    bandwidth = sizes.collective_bytes / max(result["large"] - latency, 1e-9)
    # The ring bound of the gather: each rank receives the other half of the buffer.
    bound = sizes.collective_bytes / 2 / bandwidth
    efficiency = bound / max(result["gather"] - latency, 1e-9)
    return Links(bandwidth, latency, min(1.0, max(efficiency, 0.05)))


def _tiny_llama(sizes: CalibrationSizes, dtype: Any, device: Any) -> Any:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=sizes.vocab,
        hidden_size=sizes.hidden,
        intermediate_size=4 * sizes.hidden,
        num_hidden_layers=sizes.layers,
        num_attention_heads=max(1, sizes.hidden // 64),
        num_key_value_heads=max(1, sizes.hidden // 64),
        max_position_embeddings=4 * sizes.train_length + 64,
        tie_word_embeddings=False,
    )
    return LlamaForCausalLM(config).to(device=device, dtype=dtype)


def _solve(
    a1: float, b1: float, r1: float, a2: float, b2: float, r2: float
) -> tuple[float, float] | None:
    """``(x, y)`` with ``a1 x + b1 y = r1`` and ``a2 x + b2 y = r2``; None if singular."""
    det = a1 * b2 - a2 * b1
    if not det:
        return None
    return (r1 * b2 - r2 * b1) / det, (a1 * r2 - a2 * r1) / det


def measure_model(
    sizes: CalibrationSizes, peak: float, bandwidth: float, device: Any, sync: Callable[[], None]
) -> dict[str, float]:
    """Decode steps at a few batch sizes, a forward and a training step of a small Llama.

    Returns ``layer_overhead`` and the achieved fractions the simulator uses.
    """
    import torch

    def decode_steps(model: Any, batches: tuple[int, ...]) -> dict[int, float]:
        # The decoder the rollouts run on a Llama by default (`rollout.decoder: auto`; the
        # tensor-parallel replicas' too): transformers' `generate` is much slower on CPU,
        # and a planner calibrated on it overestimated generation by 37-72 %.
        from hfsdk_backend_common.hybrid.decoder import DecoderShape, TPDecoder
        from hfsdk_backend_common.hybrid.llama_format import (
            hf_llama_shape,
            hf_llama_to_megatron,
        )

        named = {name: p.detach() for name, p in model.named_parameters()}
        weights = hf_llama_to_megatron(named, hf_llama_shape(model.config))
        decoder = TPDecoder(weights, DecoderShape.from_hf_config(model.config), tg=1, tp_rank=0)
        vocab = model.config.vocab_size
        out: dict[int, float] = {}
        for batch in batches:
            ids = torch.randint(3, vocab, (batch, 8), device=device)
            mask = torch.ones_like(ids)

            def run(n: int, ids: Any = ids, mask: Any = mask) -> None:
                decoder.generate(ids, mask, max_new_tokens=n, eos_ids=[], pad_id=0, greedy=True)

            # Two lengths: their difference is pure decode steps (no prefill). The smallest
            # batch gets three times the repeats: the per-layer overhead is fitted from it,
            # as the small difference of two models' steps, so its noise is amplified.
            repeats = sizes.repeats * (3 if batch == min(batches) else 1)
            long = _best(lambda run=run: run(1 + sizes.decode_tokens), repeats, sync)
            short = _best(lambda run=run: run(1), repeats, sync)
            out[batch] = max(long - short, 1e-9) / sizes.decode_tokens
        return out

    model = _tiny_llama(sizes, torch.float32, device)
    params = sum(p.numel() for p in model.parameters())
    calls = model.config.num_hidden_layers + 1  # the simulator's per-forward-call unit
    steps = decode_steps(model, sizes.decode_batches)
    # A decode step of b sequences ~ calls x (overhead + b x token cost) + weight bytes /
    # bandwidth + b x 2P / (peak x efficiency). A second, smaller model with fewer layers
    # separates the per-call terms from the per-byte and per-FLOP ones (two equations each).
    small_sizes = attrs.evolve(
        sizes, hidden=max(32, sizes.hidden // 4), vocab=256, layers=max(1, sizes.layers // 2)
    )
    small = _tiny_llama(small_sizes, torch.float32, device)
    small_params = sum(p.numel() for p in small.parameters())
    small_calls = small.config.num_hidden_layers + 1
    lo, hi = min(sizes.decode_batches), max(sizes.decode_batches)
    small_steps = decode_steps(small, (lo, hi))
    fit = _solve(calls, 4 * params, steps[lo], small_calls, 4 * small_params, small_steps[lo])
    if fit is None or fit[1] <= 0 or fit[0] < 0:  # noise: weights read at the copy bandwidth
        fit = (max(steps[lo] - 4 * params / bandwidth, 0.0) / calls, 1 / bandwidth)
    overhead, inv_bw = fit
    bandwidth_eff = min(1.0, max(1 / inv_bw / bandwidth, 1e-3))
    slope = (steps[hi] - steps[lo]) / (hi - lo) if hi > lo else 0.0
    small_slope = (small_steps[hi] - small_steps[lo]) / (hi - lo) if hi > lo else 0.0
    per_token = _solve(2 * params, calls, slope, 2 * small_params, small_calls, small_slope)
    if per_token is None or per_token[0] <= 0 or per_token[1] < 0:
        per_token = (max(slope, 1e-12) / (2 * params), 0.0)
    seconds_per_flop, token_overhead = per_token
    decode_eff = min(1.0, max(1 / (seconds_per_flop * peak), 1e-3))

    ids = torch.randint(3, sizes.vocab, (sizes.train_batch, sizes.train_length), device=device)
    tokens = ids.numel()

    def forward() -> None:
        with torch.no_grad():
            model(input_ids=ids)

    forward_s = _best(forward, sizes.repeats, sync)
    inference_eff = 2 * params * tokens / peak / max(forward_s - overhead * calls, 1e-9)
    optim = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def train() -> None:
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optim.step()
        optim.zero_grad(set_to_none=True)

    train_s = _best(train, sizes.repeats, sync)
    adam_s = ADAM_BYTES * params / (bandwidth * bandwidth_eff)
    train_eff = 6 * params * tokens / peak / max(train_s - 3 * overhead * calls - adam_s, 1e-9)
    clamp = lambda x: float(min(1.0, max(x, 1e-3)))  # noqa: E731
    return {
        "layer_overhead": overhead,
        "token_overhead": token_overhead,
        "decode_step_s": {str(b): s for b, s in steps.items()},
        "decode_compute_efficiency": clamp(decode_eff),
        "decode_bandwidth_efficiency": bandwidth_eff,
        "inference_efficiency": clamp(inference_eff),
        "prefill_efficiency": clamp(inference_eff),
        "training_efficiency": clamp(train_eff),
        "forward_s": forward_s,
        "train_step_s": train_s,
    }


def _probe_batch(rows: int, width: int) -> Any:
    """A batch shaped like a scored rollout: ids, masks, per-token floats and the prompts' text."""
    import torch

    from hfsdk import Batch

    ids = torch.randint(3, 1000, (rows, width))
    tensors = {
        "input_ids": ids,
        "attention_mask": torch.ones_like(ids),
        "position_ids": torch.arange(width).expand(rows, width).clone(),
        "responses": ids[:, width // 2 :].clone(),
        "response_mask": torch.ones(rows, width - width // 2),
    }
    for name in ("old_log_probs", "ref_log_probs", "values", "advantages", "returns"):
        tensors[name] = torch.zeros(rows, width - width // 2)
    text = [f"what is {i} plus {i + 1} ?" for i in range(rows)]
    return Batch.from_dict(
        tensors,
        non_tensors={"prompt": text, "answer": [str(2 * i + 1) for i in range(rows)]},
        meta={"n": 1, "greedy": False},
    )


def measure_calls(sizes: CalibrationSizes, remote: bool) -> dict[str, float]:
    """Seconds per worker-group call of an identity method carrying a rollout-sized batch.

    ``call_overhead``: in-process workers (one-device runs); with ``remote``
    also ``remote_call_overhead``: two Ray worker processes (a local Ray
    instance is started and stopped).
    """
    from hfsdk import LocalPool, colocate
    from hfsdk_planner.probe_worker import EchoWorker

    batch = _probe_batch(sizes.call_rows, sizes.call_width)

    def per_call(group: Any) -> float:
        return _best(lambda: group.echo(batch), sizes.repeats, lambda: None)

    out: dict[str, float] = {}
    group = colocate(LocalPool("probe"), {"echo": EchoWorker}, init_distributed=False)["echo"]
    try:
        out["call_overhead"] = per_call(group)
    finally:
        group.shutdown()
    if remote:
        from hfsdk import ResourcePool, connect_ray, shutdown_ray

        connect_ray(virtual_devices=2, object_store_memory=256 * 2**20, log_to_driver=False)
        try:
            with ResourcePool(2, name="probe") as pool:
                remote_group = colocate(
                    pool,
                    {"echo": EchoWorker},
                    init_distributed=False,
                    env_vars={"OMP_NUM_THREADS": "1"},
                )["echo"]
                try:
                    out["remote_call_overhead"] = per_call(remote_group)
                finally:
                    remote_group.shutdown()
        finally:
            shutdown_ray()
    return out


def calibrate(
    *,
    quick: bool = False,
    name: str = "calibrated",
    log: Callable[[str], None] | None = None,
    links_from: Cluster | None = None,
) -> tuple[Cluster, dict[str, Any]]:
    """Measure this machine; return its cluster profile and the raw measurements.

    CPU: one device per usable core, measured at each of
    :func:`calibration_threads` (the top level one thread's, ``by_threads`` the
    rest; a run is priced at the threads its workers use). GPU: the first device; the
    rest of the node's figures come from the matching preset. ``links_from``
    (an earlier profile) keeps its links and call overheads and measures only
    the device (seconds: no processes to start), e.g. to re-measure a shared
    machine's compute right before a run.
    """
    import torch

    say = log or (lambda _msg: None)
    sizes = CalibrationSizes.quick() if quick else CalibrationSizes()
    cuda = torch.cuda.is_available()
    if cuda:
        device = torch.device("cuda", 0)
        sync: Callable[[], None] = torch.cuda.synchronize
        props = torch.cuda.get_device_properties(0)
        lower = str(props.name).lower()
        base = h200_141gb() if "h200" in lower else h100_80gb() if "h100" in lower else a100_80gb()
        base = attrs.evolve(
            base,
            devices_per_node=torch.cuda.device_count(),
            device_memory=float(props.total_memory),
        )
    else:
        device = torch.device("cpu")

        def sync() -> None:
            return None

        base = local()
    threads = torch.get_num_threads()
    counts = (1,) if cuda else calibration_threads(base.devices_per_node)
    started = time.perf_counter()
    by_threads: dict[int, dict[str, Any]] = {}
    raw_threads: dict[int, dict[str, Any]] = {}
    try:
        for count in counts:
            if not cuda:
                torch.set_num_threads(count)
            where = "" if cuda else f" ({count} thread{'s' if count > 1 else ''})"
            say(f"matmul throughput, memory bandwidth, decoder and training steps{where} ...")
            measured = measure_device(sizes, device, sync)
            raw_threads[count] = {
                "matmul_flops": measured[0],
                "memory_bandwidth": measured[1],
                **measured[2],
            }
            if count > 1:
                by_threads[count] = thread_figures(*measured)
        if not cuda:
            torch.set_num_threads(1)
        fresh = 0.0 if cuda else measure_fresh_bandwidth(sizes)
    finally:
        torch.set_num_threads(threads)
    flops, bandwidth = raw_threads[1]["matmul_flops"], raw_threads[1]["memory_bandwidth"]
    model = raw_threads[1]
    shared = None
    if not cuda and base.devices_per_node > 1:
        say(f"memory bandwidth shared by {base.devices_per_node} cores ...")
        shared = measure_shared_bandwidth(sizes, base.devices_per_node)
    backend = "nccl" if cuda and torch.cuda.device_count() >= 2 else None if cuda else "gloo"
    links = None
    if links_from is not None:
        backend = "reused"
        links = Links(
            links_from.intra_node_bandwidth,
            links_from.intra_node_latency,
            float(dict(links_from.efficiency).get("gather_efficiency", 1.0)),
        )
        calls = {
            "call_overhead": links_from.call_overhead,
            "remote_call_overhead": links_from.remote_call_overhead,
        }
    else:
        if backend:
            say(f"{backend} all-reduce between two processes ...")
            links = measure_collectives(sizes, backend)
        say("worker call overhead ...")
        calls = measure_calls(sizes, remote=sizes.remote_calls)
    changes: dict[str, Any] = {
        **calls,
        "name": name,
        "peak_flops": flops["float32"] if not cuda else flops["bfloat16"],
        "flops_by_dtype": flops,
        "memory_bandwidth": bandwidth,
        "shared_memory_bandwidth": shared or 0.0,
        "fresh_memory_bandwidth": fresh,
        "decode_overlap": False,  # measure_model fits a decode step as reads + matmuls
        "layer_overhead": model["layer_overhead"],
        "token_overhead": model["token_overhead"],
        "efficiency": {key: model[key] for key in EFFICIENCY_KEYS},
        "by_threads": by_threads,
        "peaks_measured": True,
    }
    if links is not None:
        changes |= {
            "intra_node_bandwidth": links.bandwidth,
            "inter_node_bandwidth": links.bandwidth,
            "intra_node_latency": links.latency,
            "inter_node_latency": links.latency,
        }
        changes["efficiency"]["link_efficiency"] = 1.0
        changes["efficiency"]["gather_efficiency"] = links.gather_efficiency
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    changes["source"] = (
        f"hfsdk calibrate{' --quick' if quick else ''} on {socket.gethostname()} at {when} "
        f"({'cuda:0' if cuda else threads_note(counts)}; links: "
        f"{backend if links else 'preset'})"
    )
    cluster = attrs.evolve(base, **changes)
    overheads: dict[str, float] = {}
    if links_from is not None:
        overheads = {
            f"{prefix}{name}": getattr(links_from, f"{prefix}{name}")
            for prefix in ("", "remote_")
            for name in OVERHEADS
        } | {"reshard_overhead": links_from.reshard_overhead}
    elif sizes.backend_runs:
        with tempfile.TemporaryDirectory(prefix="hfsdk_calibrate_") as tmp:
            two = sizes.remote_calls and (not cuda or torch.cuda.device_count() >= 2)
            overheads = measure_backend(cluster, Path(tmp), remote=two, log=say)
    cluster = attrs.evolve(cluster, **overheads)
    raw = {
        "seconds": time.perf_counter() - started,
        "matmul_flops": flops,
        "memory_bandwidth": bandwidth,
        "fresh_memory_bandwidth": fresh,
        "shared_memory_bandwidth": shared,
        "collectives": attrs.asdict(links) if links else None,
        "calls": calls,
        "backend": overheads,
        "by_threads": {t: v for t, v in raw_threads.items() if t > 1},
        **model,
    }
    return cluster, raw


def threads_note(counts: tuple[int, ...]) -> str:
    """The profile's source note on the CPU thread counts it measured."""
    listed = ", ".join(str(c) for c in counts)
    return f"CPU device at {listed} thread(s); top level: one thread"


def format_calibration(cluster: Cluster, raw: dict[str, Any]) -> str:
    """A short report of what was measured."""
    eff = dict(cluster.efficiency)
    lines = [
        f"calibrated {cluster.name}: {cluster.num_devices} x {cluster.device_kind} "
        f"({cluster.device_memory / 1e9:.1f} GB each) in {raw['seconds']:.1f} s",
        "  matmul (one thread): "
        + ", ".join(f"{k} {v / 1e9:.1f} GFLOP/s" for k, v in sorted(raw["matmul_flops"].items())),
        f"  memory bandwidth: {raw['memory_bandwidth'] / 1e9:.1f} GB/s",
    ]
    for threads, figures in sorted(raw.get("by_threads", {}).items()):
        flops = ", ".join(
            f"{k} {v / 1e9:.1f} GFLOP/s" for k, v in sorted(figures["matmul_flops"].items())
        )
        lines.append(
            f"  at {threads} threads per device: matmul {flops}; memory bandwidth "
            f"{figures['memory_bandwidth'] / 1e9:.1f} GB/s; training "
            f"{figures['training_efficiency']:.2f} of that peak"
        )
    if raw.get("fresh_memory_bandwidth"):
        lines.append(f"  writing fresh allocations: {raw['fresh_memory_bandwidth'] / 1e9:.1f} GB/s")
    if raw.get("shared_memory_bandwidth"):
        lines.append(
            f"  memory bandwidth, every core at once: {raw['shared_memory_bandwidth'] / 1e9:.1f} "
            f"GB/s in total ({cluster.bandwidth_per_device(cluster.devices_per_node) / 1e9:.1f} "
            "per core)"
        )
    if raw["collectives"]:
        c = raw["collectives"]
        lines.append(
            f"  all-reduce (2 processes): {c['bandwidth'] / 1e9:.2f} GB/s, "
            f"latency {c['latency'] * 1e6:.0f} us; all-gather at "
            f"{c['gather_efficiency']:.2f} of the ring bound"
        )
    steps = ", ".join(f"b={b}: {s * 1e3:.2f} ms" for b, s in raw["decode_step_s"].items())
    lines.append(f"  hfsdk decoder step: {steps}")
    lines.append(
        f"  per-layer call overhead: {cluster.layer_overhead * 1e6:.0f} us, in decode "
        f"+{cluster.token_overhead * 1e6:.1f} us per sequence"
    )
    lines.append(
        "  worker call: "
        + ", ".join(
            f"{k.removesuffix('_overhead')} {v * 1e3:.2f} ms" for k, v in raw["calls"].items()
        )
    )
    if raw.get("backend"):
        lines.append(
            "  training backend: "
            + ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in raw["backend"].items())
        )
    lines.append(
        "  achieved fractions: "
        + ", ".join(f"{k.removesuffix('_efficiency')} {v:.2f}" for k, v in sorted(eff.items()))
    )
    return "\n".join(lines)
