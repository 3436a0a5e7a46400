"""How close each stage of a run came to the hardware's peak: achieved FLOP/s and bytes/s.

A stage's work is the planner's own count (:mod:`hfsdk_planner.flops`) over
the tokens the stage processed; divided by the stage's measured seconds and
its devices it is the achieved rate per device, and divided by the device's
peak (the calibrated one for the threads the run used, or a GPU preset's
data-sheet figure) its utilisation: the model FLOP utilisation (MFU) of
the matmul-bound passes (log-probs, updates, generation's prefill and
decode matmuls) and, for generation, the share of the memory bandwidth the
decode steps' weight and KV-cache reads reached. For the transition it is
the gathered bytes the run logged (``perf/reshard_bytes``) over its
seconds, against the links' bandwidth.

The tokens a pass processed: every row of the batch at the padded width
(``perf/sequence_width``), or the real tokens (``perf/tokens``) when the
role packs its rows; generation prefills the prompts (their mean length)
and decodes until the batch's longest response ends (at most
``rollout.max_response_length`` steps).
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from hfsdk_planner.cluster import Cluster
from hfsdk_planner.flops import (
    forward_flops,
    generation_bytes,
    generation_flops,
    training_flops,
)
from hfsdk_planner.model_spec import ModelSpec
from hfsdk_planner.workload import Workload

TIMINGS = {
    ("policy", "generation"): "generation",
    ("policy", "inference"): "old_log_prob",
    ("frozen_policy", "inference"): "ref_log_prob",
    ("value", "inference"): "values",
    ("policy", "training"): "update_actor",
    ("value", "training"): "update_critic",
    ("score_model", "training"): "update_score_model",
}
"""The timing (``timing/<name>_s``) each role kind's work is measured under, as the
standard dataflow names them (:func:`hfsdk.core.algorithm_spec` ``standard_dataflow``)."""

TRANSITION = "reshard"
"""The actor's train -> generate transition's timing name."""

BATCH_ROWS = "perf/batch_rows"
"""Rows of the step's trained batch, logged by the planner's step observer."""


def batch_rows(metrics: Mapping[str, float], sequences: int) -> int:
    """Rows the step's passes ran over: the logged ``perf/batch_rows``, else ``sequences``.

    Batch size x samples undercounts algorithms with several rows per prompt
    (DPO's chosen and rejected), which halved their FLOPs.
    """
    rows = metrics.get(BATCH_ROWS)
    return int(rows) if rows is not None and rows >= 1 else sequences


@attrs.frozen(kw_only=True)
class StepShape:
    """What one step processed: sequences, tokens per pass, prompt tokens, decode steps."""

    sequences: int
    pass_tokens: float
    """Tokens one training or inference pass runs over (all sequences)."""
    prompt_tokens: float
    """Mean prompt tokens per sequence (generation's prefill)."""
    decode_steps: float
    """Decode steps of generation (the longest response of the batch)."""
    head_tokens: float = 0.0
    """Positions whose LM-head logits a log-prob or training pass computes: each row's
    response (the backend keeps logits there only); 0: every pass token."""


@attrs.frozen(kw_only=True)
class StageWork:
    """One timed stage's work: FLOPs and bytes read over all its devices."""

    name: str
    flops: float
    bytes: float = 0.0
    devices: int = 1
    dtype: str = ""
    """The compute dtype whose peak the stage is measured against ("": the hardware's)."""

    def peak(self, hardware: Cluster) -> float:
        """The peak FLOP/s of ``hardware`` in the stage's dtype."""
        return hardware.for_dtype(self.dtype).peak_flops if self.dtype else hardware.peak_flops


def step_shape(
    metrics: Mapping[str, float], sequences: int, max_response: int, packed: bool = False
) -> StepShape | None:
    """The step's shape from its metrics (``None`` when it logged no token count).

    ``sequences`` (batch x samples) gives way to the batch's logged rows
    (:func:`batch_rows`). Unpacked passes run over every row at the batch's padded width
    (``perf/sequence_width``); packed ones over the real tokens (``perf/tokens``).
    """
    tokens = metrics.get("perf/tokens")
    rate, step_s = metrics.get("perf/throughput_tokens_per_s"), metrics.get("timing/step_s")
    if tokens is None and rate is not None and step_s:
        tokens = rate * step_s
    response = metrics.get("response_length/mean")
    sequences = batch_rows(metrics, sequences)
    if not tokens or response is None or sequences < 1:
        return None
    prompt = max(0.0, tokens / sequences - response)
    width = metrics.get("perf/sequence_width")
    pass_tokens = float(tokens) if packed or width is None else sequences * float(width)
    longest = float(response) if width is None else max(float(response), width - prompt)
    decode = min(float(max_response), longest)
    # Logits are kept for the response columns plus the one predicting the first token
    # (padded to the longest response unless packed, where the real ones are kept).
    kept = float(response) if packed else decode
    return StepShape(
        sequences=sequences,
        pass_tokens=pass_tokens,
        prompt_tokens=prompt,
        decode_steps=decode,
        head_tokens=min(pass_tokens, sequences * (kept + 1)),
    )


ONE_WIDE_HEADS = frozenset({"value", "score_model", "scorer"})
"""Role kinds whose output head is one wide (a value or a score per position), not the LM head."""


def stage_work(
    roles: Mapping[str, tuple[str, tuple[str, ...], ModelSpec, int]],
    shape: StepShape,
    *,
    recompute: bool = False,
    weight_bytes: int = 2,
    running: int | None = None,
    workloads: Mapping[str, Workload] | None = None,
    generation_tp: int = 1,
    dtypes: Mapping[str, str] | None = None,
) -> dict[str, StageWork]:
    """The work of each timed stage: ``roles`` maps a role to (its kind, its work kinds,
    its model, its devices); roles timed under one name (two value roles) add up.

    ``workloads`` gives a role its own levers (update ``epochs``, ``recompute``, the
    weights' ``dtype_bytes``, the policy's ``lora_rank``); a role without one gets
    ``recompute`` and ``weight_bytes``. Generation runs on ``devices // generation_tp``
    replicas, each decoding its share of the sequences ``running`` at a time. ``dtypes``
    gives a role's compute dtype, whose peak its stages are measured against.
    """
    out: dict[str, StageWork] = {}
    for key, (kind, works, model, devices) in roles.items():
        own = (workloads or {}).get(key)
        head_width = 1 if kind in ONE_WIDE_HEADS else None
        # An LM head runs at the response positions only; a one-wide head at every one.
        head = (shape.head_tokens or None) if head_width is None else None
        for work in works:
            name = TIMINGS.get((kind, work))
            if name is None:
                continue
            if work == "generation":
                flops = generation_flops(
                    model, shape.sequences, shape.prompt_tokens, shape.decode_steps
                )
                read = _generation_read(
                    model,
                    shape,
                    replicas=max(1, devices // max(1, generation_tp)),
                    running=running,
                    weight_bytes=own.dtype_bytes if own else weight_bytes,
                )
            elif work == "inference":
                flops, read = forward_flops(model, shape.pass_tokens, head, head_width), 0.0
            else:
                epochs = own.epochs if own else 1
                flops = epochs * training_flops(
                    model,
                    shape.pass_tokens,
                    own.recompute if own else recompute,
                    head,
                    head_width,
                    lora_rank=own.lora_rank if own and kind == "policy" else 0,
                )
                read = 0.0
            before = out.get(name)
            if before is not None:
                flops, read = flops + before.flops, read + before.bytes
            dtype = (dtypes or {}).get(key, "")
            out[name] = StageWork(name=name, flops=flops, bytes=read, devices=devices, dtype=dtype)
    return out


def _generation_read(
    model: ModelSpec, shape: StepShape, *, replicas: int, running: int | None, weight_bytes: int
) -> float:
    """Bytes all ``replicas`` read decoding: each its share of the sequences, ``running`` at a
    time, reading its own copy of the weights every step."""
    base, extra = divmod(shape.sequences, replicas)
    total = 0.0
    for count, share in ((extra, base + 1), (replicas - extra, base)):
        if count and share:
            total += count * generation_bytes(
                model,
                share,
                shape.prompt_tokens,
                shape.decode_steps,
                min(running or share, share),
                weight_bytes,
            )
    return total


def utilisation_metrics(
    work: Mapping[str, StageWork],
    metrics: Mapping[str, float],
    hardware: Cluster,
) -> dict[str, float]:
    """``perf/<stage>_flops_per_s`` (achieved, per device) and, when the hardware's peaks
    are measured or quoted, ``perf/<stage>_mfu`` (of ``hardware.peak_flops``); for
    generation also ``perf/generation_bytes_per_s`` and ``perf/generation_bandwidth_util``
    (of the memory bandwidth a device gets while the stage's devices stream at once), for
    the transition ``perf/reshard_bytes_per_s`` and ``perf/reshard_link_util``.

    A stage the step did not time (a skipped pass) gets nothing. Generation's time
    excludes the transition's (``timing/reshard_s``).
    """
    out: dict[str, float] = {}
    shares = hardware.peaks_measured

    def seconds(name: str) -> float:
        value = float(metrics.get(f"timing/{name}_s", 0.0))
        if name == "generation":
            value -= float(metrics.get(f"timing/{TRANSITION}_s", 0.0))
        return value

    for name, stage in work.items():
        took = seconds(name)
        if took <= 0 or f"timing/{name}_s" not in metrics:
            continue
        rate = stage.flops / took / stage.devices
        out[f"perf/{name}_flops_per_s"] = rate
        if shares:
            out[f"perf/{name}_mfu"] = rate / stage.peak(hardware)
        if stage.bytes:
            bytes_rate = stage.bytes / took / stage.devices
            out[f"perf/{name}_bytes_per_s"] = bytes_rate
            if shares:
                bandwidth = hardware.bandwidth_per_device(stage.devices)
                out[f"perf/{name}_bandwidth_util"] = bytes_rate / bandwidth
    moved, took = metrics.get("perf/reshard_bytes", 0.0), seconds(TRANSITION)
    if moved and took > 0:
        out[f"perf/{TRANSITION}_bytes_per_s"] = moved / took
        if shares:
            out[f"perf/{TRANSITION}_link_util"] = moved / took / hardware.intra_node_bandwidth
    return out


def utilisation_keys(name: str) -> tuple[str, ...]:
    """The share-of-peak metrics of stage ``name`` (what ``hfsdk plot`` draws)."""
    return (f"perf/{name}_mfu", f"perf/{name}_bandwidth_util", f"perf/{name}_link_util")
