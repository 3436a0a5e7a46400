"""Latency estimates for a role's work under a parallel layout.

An analytic model in the spirit of the HybridFlow paper's simulator:

* generation: prefill is compute-bound; each decode step reads the weight
  shard and the KV cache from device memory (or is compute-bound when the
  per-replica batch is large); tensor parallelism adds two all-reduces per
  layer per step;
* inference: a forward pass over the batch (2 FLOPs per block parameter per
  token, the LM head at the response positions: :mod:`hfsdk_planner.flops`);
* training: forward, backward and, with ``recompute``, the blocks' forward
  again, ``epochs`` times, tensor-parallel all-reduces, the 1F1B pipeline bubble,
  pipeline sends, and per optimizer step a data-parallel gradient reduction and the
  Adam update of the device's shard (memory-bound);
* the actor's train -> generate transition: the all-gather inside each
  micro-DP group of the 3D-HybridEngine.

Collectives use ring bandwidth terms plus a per-call latency that grows with
log2 of the group size (tree-style small-message algorithms). Every forward
call of a layer also pays the cluster's fixed ``layer_overhead`` (kernel
launches, per-op dispatch): what dominates small models, short sequences and
CPUs, and what a calibration measures.
"""

from __future__ import annotations

import math

import attrs

from hfsdk import HfsdkError
from hfsdk_planner.cluster import Cluster
from hfsdk_planner.flops import decode_step_bytes, forward_flops, training_flops
from hfsdk_planner.layout import (
    GenerationLayout,
    Layout,
    generation_layouts,
    training_layouts,
)
from hfsdk_planner.memory_model import RoleMemory, is_lora_policy, role_memory
from hfsdk_planner.model_spec import ModelSpec
from hfsdk_planner.workload import RoleTask, Workload

ACT_BYTES = 2
ADAM_BYTES = 28
"""Bytes an Adam step reads and writes per parameter: fp32 weight, gradient, two moments
read; weight and moments written."""


def _efficiency(_inst: object, attr: attrs.Attribute, value: float) -> None:
    if not (isinstance(value, int | float) and 0 < value <= 1):
        raise HfsdkError(f"simulator setting {attr.name!r} must be in (0, 1], got {value!r}")


@attrs.frozen(kw_only=True)
class SimulatorSettings:
    """Achieved fractions of the hardware's peaks (software efficiency)."""

    training_efficiency: float = attrs.field(default=0.45, validator=_efficiency)
    inference_efficiency: float = attrs.field(default=0.55, validator=_efficiency)
    prefill_efficiency: float = attrs.field(default=0.55, validator=_efficiency)
    decode_compute_efficiency: float = attrs.field(default=0.4, validator=_efficiency)
    decode_bandwidth_efficiency: float = attrs.field(default=0.7, validator=_efficiency)
    link_efficiency: float = attrs.field(default=0.8, validator=_efficiency)
    gather_efficiency: float = attrs.field(default=1.0, validator=_efficiency)
    """All-gathers' and reduce-scatters' fraction of the ring bound at the link's all-reduce
    bandwidth (NCCL: about 1; gloo on CPU: about half, measured by the calibration)."""


@attrs.frozen
class Candidate:
    """One way to run a role on n devices, with its simulated cost and memory.

    ``work_seconds`` is aligned with the task's ``work``; the transition into
    generation is included in the role's first generation entry.
    """

    layout: Layout
    generation: GenerationLayout | None
    work_seconds: tuple[float, ...]
    transition_seconds: float
    memory: RoleMemory

    @property
    def total_seconds(self) -> float:
        """The role's busy time in one iteration."""
        return math.fsum(self.work_seconds)

    @property
    def peak_bytes(self) -> float:
        """Per-device peak memory of the role."""
        return self.memory.peak


def settings_for(cluster: Cluster, settings: SimulatorSettings | None = None) -> SimulatorSettings:
    """``settings`` if given, else the defaults overridden by the cluster's ``efficiency``."""
    if settings is not None:
        return settings
    known = {f.name for f in attrs.fields(SimulatorSettings)}
    given = dict(cluster.efficiency)
    unknown = sorted(set(given) - known)
    if unknown:
        raise HfsdkError(
            f"cluster {cluster.name!r}: efficiency has unknown keys {unknown}; allowed: "
            f"{', '.join(sorted(known))}"
        )
    return SimulatorSettings(**given)


def head_tokens(workload: Workload) -> int:
    """Positions whose LM-head output a log-prob or training pass computes: each sequence's
    response (the backend keeps logits there only, HF ``logits_to_keep``)."""
    return workload.sequences * min(workload.response_length + 1, workload.sequence_length)


class Simulator:
    """Estimates stage latencies of role tasks on a cluster."""

    def __init__(self, cluster: Cluster, settings: SimulatorSettings | None = None) -> None:
        self.cluster = cluster
        self.settings = settings_for(cluster, settings)

    def _layer_calls(self, model: ModelSpec, calls: float, stages: int = 1) -> float:
        """Fixed overhead of ``calls`` forward calls through a pipeline stage's layers."""
        return calls * (model.num_layers / stages + 1) * self.cluster.layer_overhead

    # -- collectives -------------------------------------------------------------------
    def _call_latency(self, group: int, span: int) -> float:
        return self.cluster.link(span)[1] * math.ceil(math.log2(group))

    def allreduce(self, nbytes: float, group: int, span: int, calls: float = 1) -> float:
        """Seconds for ``calls`` all-reduces moving ``nbytes`` per device in total."""
        if group <= 1:
            return 0.0
        bandwidth = self.cluster.link(span)[0] * self.settings.link_efficiency
        return 2 * (group - 1) / group * nbytes / bandwidth + calls * self._call_latency(
            group, span
        )

    def allgather(self, nbytes_out: float, group: int, span: int, calls: float = 1) -> float:
        """Seconds to all-gather so each device ends with ``nbytes_out`` bytes."""
        if group <= 1:
            return 0.0
        bandwidth = (
            self.cluster.link(span)[0]
            * self.settings.link_efficiency
            * self.settings.gather_efficiency
        )
        return (group - 1) / group * nbytes_out / bandwidth + calls * self._call_latency(
            group, span
        )

    def send(self, nbytes: float, span: int, calls: float = 1) -> float:
        """Seconds for point-to-point sends of ``nbytes`` in total."""
        bandwidth, latency = self.cluster.link(span)
        return nbytes / (bandwidth * self.settings.link_efficiency) + calls * latency

    # -- work kinds --------------------------------------------------------------------
    def _flops_time(self, flops: float, devices: int, efficiency: float) -> float:
        return flops / (devices * self.cluster.peak_flops * efficiency)

    def inference_seconds(self, model: ModelSpec, layout: Layout, workload: Workload) -> float:
        """A forward pass over every sequence of the iteration."""
        p, t, d = layout.p, layout.t, layout.d
        tokens_per_replica = workload.tokens / d
        micro_batches = max(1, math.ceil(workload.sequences / d / workload.forward_micro_batch))
        compute = self._flops_time(
            forward_flops(model, workload.tokens, head_tokens(workload)),
            layout.devices,
            self.settings.inference_efficiency,
        )
        layers = model.num_layers / p
        tp = self.allreduce(
            layers * 2 * tokens_per_replica * model.hidden_size * ACT_BYTES,
            t,
            t,
            calls=layers * 2 * micro_batches,
        )
        pp = 0.0
        if p > 1:
            pp = self.send(
                tokens_per_replica * model.hidden_size * ACT_BYTES / t, p * t, calls=micro_batches
            )
        overhead = self._layer_calls(model, micro_batches, p)
        overhead += micro_batches * self.cluster.forward_overhead
        return (compute + tp + overhead) * (1 + (p - 1) / micro_batches) + pp

    def training_seconds(
        self, model: ModelSpec, layout: Layout, workload: Workload, lora_rank: int = 0
    ) -> float:
        """Forward + backward (+ recomputation) over the batch, in optimizer-step chunks,
        ``workload.epochs`` times (``lora_rank``: the role trains LoRA adapters only)."""
        p, t, d = layout.p, layout.t, layout.d
        micro_batches = max(
            1,
            math.ceil(
                workload.sequences / (d * workload.optimizer_steps * workload.micro_batch_size)
            ),
        )
        # Every epoch runs the whole batch again: its micro-batches and its updates.
        steps = workload.optimizer_steps * workload.epochs
        tokens = workload.tokens * workload.epochs
        tokens_per_replica = tokens / d
        passes = 4 if workload.recompute else 3  # forward, (recomputed forward,) 2x backward
        compute = self._flops_time(
            training_flops(
                model,
                tokens,
                workload.recompute,
                head_tokens(workload) * workload.epochs,
                lora_rank=lora_rank,
            ),
            layout.devices,
            self.settings.training_efficiency,
        )
        layers = model.num_layers / p
        # Forward, recomputed forward and backward: two all-reduces each per layer.
        tp = self.allreduce(
            layers * 6 * tokens_per_replica * model.hidden_size * ACT_BYTES,
            t,
            t,
            calls=layers * 6 * micro_batches * steps,
        )
        pp = 0.0
        if p > 1:
            pp = 2 * self.send(
                tokens_per_replica * model.hidden_size * ACT_BYTES / t,
                p * t,
                calls=micro_batches * steps,
            )
        grads = self.allreduce(
            2 * model.num_params / layout.model_parallel, d, layout.devices, calls=1
        )
        # A backward pass costs about two forward passes' dispatch.
        overhead = self._layer_calls(model, passes * micro_batches * steps, p)
        overhead += micro_batches * steps * self.cluster.microbatch_overhead
        return (
            (compute + tp + overhead) * (1 + (p - 1) / micro_batches)
            + pp
            + steps * (grads + self.optimizer_step_seconds(model, layout.devices, layout.devices))
            + steps * self.cluster.update_overhead
        )

    def optimizer_step_seconds(self, model: ModelSpec, shards: int, busy: int = 1) -> float:
        """One Adam step over a device's shard: memory-bound, ``ADAM_BYTES`` per parameter.

        ``busy`` devices step at once (they may share a memory bus).
        """
        bandwidth = (
            self.cluster.bandwidth_per_device(busy) * self.settings.decode_bandwidth_efficiency
        )
        return ADAM_BYTES * model.num_params / shards / bandwidth

    def sharded_data_parallel_seconds(
        self,
        model: ModelSpec,
        devices: int,
        forward_passes: float,
        backward_passes: float = 0,
        weight_bytes: int = 2,
    ) -> float:
        """FSDP (ZeRO-3) traffic over ``devices`` ranks: per-layer all-gathers and reduce-scatters.

        Each forward pass of a layer all-gathers its parameters; each backward
        pass gathers them again and reduce-scatters their gradients (costed
        like an all-gather of the same bytes). Latency-bound for small models.
        """
        if devices <= 1:
            return 0.0
        units = model.num_layers + 1  # the layers plus embeddings / output layer
        unit_bytes = weight_bytes * model.num_params / units
        gathers = (forward_passes + backward_passes) * units
        scatters = backward_passes * units
        return self.allgather(unit_bytes * gathers, devices, devices, calls=gathers) + (
            self.allgather(unit_bytes * scatters, devices, devices, calls=scatters)
        )

    def decode_step_seconds(
        self,
        model: ModelSpec,
        tg: int,
        running: int,
        context: float,
        weight_bytes: int = 2,
        busy: int = 1,
    ) -> float:
        """One decode step of ``running`` sequences with mean context ``context`` on ``tg`` devices.

        Memory-bound (read the weight shard and the KV cache) unless the batch
        is large enough to be compute-bound; plus two all-reduces per layer.
        ``busy`` devices decode at once (they may share a memory bus).
        """
        read_bytes = decode_step_bytes(model, running, context, weight_bytes, tg)
        memory_bound = read_bytes / (
            self.cluster.bandwidth_per_device(busy) * self.settings.decode_bandwidth_efficiency
        )
        compute_bound = self._flops_time(
            forward_flops(model, running / tg), 1, self.settings.decode_compute_efficiency
        )
        comm = self.allreduce(
            model.num_layers * 2 * running * model.hidden_size * ACT_BYTES,
            tg,
            tg,
            calls=model.num_layers * 2,
        )
        per_token = (model.num_layers + 1) * running / tg * self.cluster.token_overhead
        if self.cluster.decode_overlap:
            step = max(memory_bound, compute_bound)
        else:  # the calibration's model: reads, then multiplies
            step = memory_bound + compute_bound
        return step + comm + self._layer_calls(model, 1) + per_token

    def generation_seconds(
        self, model: ModelSpec, gen: GenerationLayout, workload: Workload, busy: int = 0
    ) -> float:
        """Prefill plus decoding on rollout layout ``gen``; replicas run concurrently.

        A replica's share of the batch is decoded ``gen.running`` sequences at
        a time; each wave takes ``response_length`` steps. ``busy``: devices
        streaming at once (0: the layout's own, ``tg * dg``).
        """
        tg, dg = gen.tg, gen.dg
        replica_sequences = math.ceil(workload.sequences / dg)
        prefill_tokens = replica_sequences * workload.prompt_length
        waves = math.ceil(replica_sequences / min(gen.running, replica_sequences))
        prefill = (
            self._layer_calls(model, waves)
            + self._flops_time(
                forward_flops(model, prefill_tokens), tg, self.settings.prefill_efficiency
            )
            + self.allreduce(
                model.num_layers * 2 * prefill_tokens * model.hidden_size * ACT_BYTES,
                tg,
                tg,
                calls=model.num_layers * 2,
            )
        )
        # Mean context over the response: the KV cache read grows linearly.
        context = workload.prompt_length + workload.generated_tokens / 2
        running = min(gen.running, replica_sequences)
        full_waves, rest = divmod(replica_sequences, running)
        width = workload.dtype_bytes
        busy = busy or tg * dg
        decode = full_waves * self.decode_step_seconds(model, tg, running, context, width, busy)
        if rest:
            decode += self.decode_step_seconds(model, tg, rest, context, width, busy)
        return prefill + workload.generated_tokens * decode

    def transition_seconds(self, model: ModelSpec, layout: Layout, gen: GenerationLayout) -> float:
        """Train -> generate resharding: the 3D-HybridEngine's broadcasts in each micro-DP group.

        Bytes per rank are the engine's formula (``(dg-1)/dg`` of the
        generation shard; what ``benchmarks/reshard.py`` counts), moved at link
        bandwidth, plus one call latency per broadcast the engine makes.
        """
        from hfsdk_backend_common.hybrid.accounting import (
            transition_collectives,
            uniform_transition_bytes,
        )
        from hfsdk_backend_common.hybrid.layout import GenLayout, TrainLayout

        train = TrainLayout(layout.p, layout.t, layout.d)
        micro = GenLayout(1, gen.tg, layout.model_parallel // gen.tg)
        if micro.dg == 1:
            return 0.0
        nbytes = uniform_transition_bytes(model.num_params, train, micro, ACT_BYTES)
        calls = transition_collectives(model.num_layers, train, micro)
        return self.send(nbytes, layout.model_parallel, calls=0) + calls * self._call_latency(
            micro.dg, layout.model_parallel
        )

    # -- candidates --------------------------------------------------------------------
    def evaluate(self, task: RoleTask, layout: Layout, gen: GenerationLayout | None) -> Candidate:
        """Simulate ``task`` with ``layout`` (and rollout layout ``gen`` if it generates)."""
        return self._combine(task, layout, gen, {})

    def _combine(
        self,
        task: RoleTask,
        layout: Layout,
        gen: GenerationLayout | None,
        generation_memo: dict[GenerationLayout, float],
    ) -> Candidate:
        # Generation time depends on the rollout layout only, so it is shared
        # by every training layout that regroups into it.
        model, workload = task.model, task.workload
        seconds: list[float] = []
        transition = 0.0
        inference = training = None
        for _stage, kind in task.work:
            if kind == "generation":
                if gen is None:
                    raise HfsdkError("a generating role needs a rollout layout")
                value = generation_memo.get(gen)
                if value is None:
                    value = generation_memo[gen] = self.generation_seconds(model, gen, workload)
                if "generation" not in (k for _s, k in task.work[: len(seconds)]):
                    # Reshard once per iteration, before the role's first generation.
                    transition = self.transition_seconds(model, layout, gen)
                    value += transition
            elif kind == "inference":
                if inference is None:
                    inference = self.inference_seconds(model, layout, workload)
                value = inference
            else:
                if training is None:
                    lora = workload.lora_rank if is_lora_policy(task) else 0
                    training = self.training_seconds(model, layout, workload, lora)
                value = training
            seconds.append(value)
        return Candidate(
            layout=layout,
            generation=gen,
            work_seconds=tuple(seconds),
            transition_seconds=transition,
            memory=role_memory(task, layout, gen),
        )

    def candidates(self, task: RoleTask, devices: int) -> tuple[Candidate, ...]:
        """The role's useful layouts on ``devices`` devices: fastest first.

        Only candidates that fit one device's usable memory on their own and
        that no other candidate beats on both time and memory are kept (a
        Pareto front: as time grows, memory strictly shrinks).
        """
        workload = task.workload
        max_dp = max(1, workload.sequences // workload.optimizer_steps)
        usable = self.cluster.usable_memory
        memo: dict[GenerationLayout, float] = {}
        found: list[tuple[float, float, tuple[int, ...], Candidate]] = []
        for layout in training_layouts(task.model, devices, self.cluster, max_dp):
            gens: list[GenerationLayout | None] = [None]
            if task.generates:
                gens = list(
                    generation_layouts(
                        task.model,
                        layout,
                        self.cluster,
                        workload.sequences,
                        workload.max_running_sequences,
                    )
                )
            for gen in gens:
                if gen is not None and role_memory(task, layout, gen).peak > usable:
                    continue  # cheap check first: most rollout options do not fit
                candidate = self._combine(task, layout, gen, memo)
                if candidate.peak_bytes > usable:
                    continue
                key = (
                    layout.p,
                    layout.t,
                    layout.d,
                    gen.tg if gen else 0,
                    -gen.running if gen else 0,
                )
                found.append((candidate.total_seconds, candidate.peak_bytes, key, candidate))
        found.sort(key=lambda item: item[:3])
        front: list[Candidate] = []
        for _total, peak, _key, candidate in found:
            if not front or peak < front[-1].peak_bytes:
                front.append(candidate)
        return tuple(front)
