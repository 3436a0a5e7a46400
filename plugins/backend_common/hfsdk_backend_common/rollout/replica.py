"""A rollout replica on a pool of its own (``placement.pools.rollout``), fed by the actor.

Each rank of the ``rollout`` worker group holds a full copy of the policy (an
HF module loaded from the actor's model directory) and is, to the rollout
backend, an :class:`hfsdk.ActorSource` (:class:`ReplicaSource`): the rollout
is built through :func:`hfsdk.build_rollout` like any other, and generates on
the replica's own module. After every actor update the weights arrive over
the sync group (:mod:`hfsdk_backend_common.weight_sync`): the actor's rank 0
broadcasts them, every replica rank receives them in place.

Each output also carries ``rollout_log_probs`` (the replica's temperature-scaled
log-probs of the tokens it sampled, from one forward pass when the rollout
reports none): the behaviour policy's, for the off-policy correction.

**Partial rollouts** (``trainer.partial_rollout_tokens``):
:meth:`RolloutReplicaWorker.start_partial` and
:meth:`~RolloutReplicaWorker.continue_partial` generate a batch in segments of
that many tokens, one call each; a weight sync the controller queues between
two segments applies to the rest of every response (the in-flight generation
is interrupted there and continued with the new weights: the prompt and the
response so far are the next segment's prompt). Every token is tagged in
``token_versions`` with the policy version that sampled it (the replica's
sync count minus one: the trainer's updates) and its log-prob is taken with
those same weights.

**Tensor-parallel / pipelined replicas** (``placement.pools.rollout.tp`` = tg,
``.pp`` = pg, tg * pg > 1): the pool's ranks form replicas of pg * tg
consecutive ranks (pg stages of tg tensor ranks) that hold megatron-format
slices of their stage and decode together
(:mod:`~hfsdk_backend_common.rollout.tp_replica`).

A call may carry ``meta['sampling_seed']``: the replica seeds its sampler
with it (plus its rank), so what it generates for a step does not depend on
the replica's history (a restarted replica or a resumed run samples the same).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import attrs
import torch

from hfsdk import (
    Batch,
    BuiltinProtocol,
    DataParallelInfo,
    HfsdkError,
    Worker,
    assemble_rollout,
    build_rollout,
    eos_token_ids,
    generate_rollout,
    load_tokenizer,
    register,
)
from hfsdk_backend_common.engine_support import resolve_device, sampling_temperature
from hfsdk_backend_common.role_fields import TrainedRoleConfig
from hfsdk_backend_common.rollout.tp_replica import TPReplicaSource, pool_key
from hfsdk_backend_common.token_ops import response_log_probs
from hfsdk_backend_common.weight_check import WeightSyncMismatch, fingerprint
from hfsdk_backend_common.weight_sync import (
    SyncEndpoint,
    WeightSyncGroup,
    receive_stream,
    receive_weights,
    verify_sync,
)

ROLLOUT_LOG_PROBS = "rollout_log_probs"
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


class ReplicaSource:
    """The replica's own HF module as an :class:`hfsdk.ActorSource` (generation only)."""

    def __init__(
        self,
        model_path: str,
        tokenizer_path: str,
        *,
        device: torch.device,
        dtype: torch.dtype,
        dp: DataParallelInfo,
    ) -> None:
        from transformers import AutoModelForCausalLM

        self.model_path = model_path
        self.tokenizer = load_tokenizer(tokenizer_path)
        self.device = device
        self.compute_dtype = dtype
        self.dp = dp
        self.module = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype).to(device)
        self.module.eval().requires_grad_(False)
        self.hf_config = self.module.config
        configured = self.module.generation_config.eos_token_id
        self.generation_eos_ids: list[int] = (
            [] if configured is None else [configured] if isinstance(configured, int)
            else list(configured)
        )  # fmt: skip
        self.weights_version = 0
        self.last_weights_metrics: dict[str, float] = {}
        self.weight_probes: dict[str, Any] = {}  # sends only what it holds

    def hf_weights(self) -> Iterator[tuple[str, torch.Tensor]]:
        """The replica's weights (HF names, one at a time)."""
        for name, param in self.module.named_parameters():
            yield name, param.detach()

    @contextlib.contextmanager
    def live_hf_module(self, *, gather: bool = False) -> Iterator[torch.nn.Module]:
        """The replica's module: it generates as is (zero copy)."""
        with torch.no_grad():
            yield self.module

    def generation_shards(self, config: Any) -> None:
        """No resharding: the replica holds full weights."""
        return None

    def targets(self) -> dict[str, torch.Tensor]:
        """Name → parameter, what the sync writes into."""
        return dict(self.module.named_parameters())

    def log_probs(self, batch: Batch) -> torch.Tensor:
        """Behaviour log-probs (B, R) of ``batch``'s responses on the replica's module."""
        return replica_log_probs(self.module, batch)

    def digest(self) -> dict[str, float]:
        """Each weight's sum."""
        return {n: float(p.double().sum()) for n, p in self.module.named_parameters()}


def replica_log_probs(module: torch.nn.Module, batch: Batch) -> torch.Tensor:
    """The module's temperature-scaled log-probs (B, R) of ``batch``'s responses, 0 where masked."""
    with torch.no_grad():
        device = next(module.parameters()).device
        logits = module(
            input_ids=batch["input_ids"].to(device),
            attention_mask=batch["attention_mask"].to(device),
            position_ids=batch["position_ids"].to(device),
        ).logits
        log_probs, _ = response_log_probs(
            logits,
            batch["responses"].to(device),
            temperature=sampling_temperature(batch),
            with_entropy=False,
        )
    return (log_probs * batch["response_mask"].to(log_probs)).cpu()


def _first_problem(line: str | None) -> str | None:
    """The first failing rank's line on every rank of the rollout pool (``None``: all verified).

    A tensor-parallel replica's ranks generate together, and the pool's outputs are
    collected as one batch: no rank may take new weights while another rejected them
    (it would report another version). Collective over the pool (every rank receives).
    """
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
        return line
    lines: list[str | None] = [None] * dist.get_world_size()
    dist.all_gather_object(lines, line)
    return next((found for found in lines if found is not None), None)


class RolloutReplicaWorker(Worker):
    """One rank of the ``rollout`` worker group (see module doc).

    ``section`` is the actor's config section (a backend's
    :class:`~hfsdk_backend_common.role_fields.TrainedRoleConfig`: model and
    tokenizer paths, ``dtype``, ``device``); ``assets`` fills the paths it leaves out.
    """

    def __init__(self, *, role: str, config: Any, assets: Any, section: TrainedRoleConfig) -> None:
        super().__init__()
        self.run_config = config
        model_path = section.model_path or assets.model_path
        tokenizer_path = section.tokenizer_path or assets.tokenizer_path or model_path
        common = {
            "device": resolve_device(section.device),
            "dtype": _DTYPES[section.dtype],
            "dp": DataParallelInfo(size=self.world_size, rank=self.rank),
        }
        pool = config.placement.pools.get(role)  # absent when a test builds a replica by hand
        self.tg, self.pg = (pool.tp, pool.pp) if pool is not None else (1, 1)
        self.sliced = self.tg * self.pg > 1
        self.source: Any
        if self.sliced:  # a replica of pg stages of tg ranks (module tp_replica)
            self.source = TPReplicaSource(
                str(model_path), str(tokenizer_path), tg=self.tg, pg=self.pg, rank=self.rank,
                world=self.world_size, **common,
            )  # fmt: skip
        else:
            self.source = ReplicaSource(str(model_path), str(tokenizer_path), **common)
        self.rollout = build_rollout(config.rollout, self.source)
        if self.sliced and not self.source.shards_taken:
            raise HfsdkError(
                f"{pool_key(self.tg, self.pg)} needs a rollout that decodes sliced shards, but "
                f"rollout.backend={config.rollout.backend!r} did not take them (nor does "
                "rollout.decoder: transformers); use rollout.backend: hf with the hfsdk "
                "decoder, or tp: 1 and pp: 1"
            )
        self.sync_group: WeightSyncGroup | None = None
        self.synced_version = -1
        """The trainer's weights version of the last verified sync (-1: none yet)."""
        self._segment_rollouts: dict[int, Any] = {}
        torch.manual_seed(config.trainer.seed + 7919 * (self.rank + 1))

    def close(self) -> None:
        """Release the rollout's engines and the sync group."""
        for rollout in (self.rollout, *self._segment_rollouts.values()):
            rollout.close()
        if self.sync_group is not None:
            self.sync_group.close()

    @register(protocol=BuiltinProtocol.ONE_TO_ALL)
    def join_weight_sync(self, endpoint: SyncEndpoint, timeout_s: float = 300.0) -> int:
        """Join the actor's sync group as rank 1 + this rank (blocks until all joined)."""
        self.sync_group = WeightSyncGroup(
            endpoint, 1 + self.rank, device=self.source.device, timeout_s=timeout_s
        )
        return 1 + self.rank

    @register(protocol=BuiltinProtocol.ONE_TO_ALL)
    def receive_weights(self, fault: str | None = None) -> dict[str, Any]:
        """The actor's new weights, in place, verified; ``sync/*`` metrics of this rank.

        What arrived is checked against the sender's manifest and what the rollout holds
        afterwards is read back (:mod:`..weight_check`), and so is a rollout's own
        copy when it keeps one (a vLLM engine raises :class:`..WeightSyncMismatch` from
        ``update_weights``): ``sync/verified`` is 1.0, or ``sync/mismatch`` says what
        differs (the controller restarts the replicas) and the weights version this replica
        reports stays the last verified one; the pool's ranks agree on the verdict (one
        rank's problem fails the sync on every rank). ``fault`` (fault injection): ``"stale"``
        (``sync_stale``, see :func:`receive_weights`), or ``"slice_drop"`` (``slice_drop``,
        sliced replicas: the last tensor-parallel rank of each replica does not write the
        first slice it received, as a copy that missed the live tensor would).
        """
        if self.sync_group is None:
            raise HfsdkError("receive_weights before join_weight_sync: the sync group is missing")
        if self.sliced:  # full tensors on the wire; this rank keeps its stage's slices
            # slice_drop: the last tensor rank of each replica loses the write of a slice.
            last = self.source.shards.tp_rank == self.tg - 1
            receiver = self.source.receiver(lose_first_write=fault == "slice_drop" and last)
            live = receiver.slices
            if fault == "stale":
                receiver.slices = {name: t.clone() for name, t in live.items()}
            result: dict[str, Any] = dict(receive_stream(self.sync_group, receiver.accept))
            missing = receiver.missing()
            held = {name: fingerprint(live[name]) for name in receiver.written}
            mismatch = verify_sync(result, receiver.written, held)
        else:
            result = receive_weights(self.sync_group, self.source.targets(), fault=fault)
            missing = result.pop("missing")
            mismatch = result.pop("mismatch")
            checked = result.pop("merges_verified")
            if checked:  # a LoRA actor's merged weights, each checked as held
                result["sync/merges_verified"] = float(checked)
        version = result.pop("version")
        for key in ("manifest", "wire", "probes"):
            result.pop(key)
        if mismatch is None and missing:
            mismatch = (
                f"{len(missing)} rollout weight(s) left unset (first: {missing[0]!r}); the "
                "actor's hf_weights must yield every parameter"
            )
        where = f"weights version {version} on replica rank {self.rank}"
        # Every rank then keeps its old weights version: the pool's outputs stay one batch.
        line = _first_problem(None if mismatch is None else f"{where}: {mismatch}")
        if line is None:
            self.source.weights_version += 1
            try:  # a rollout with its own copy (vLLM) reloads it now and reads it back
                for rollout in (self.rollout, *self._segment_rollouts.values()):
                    rollout.update_weights(self.source)
            except WeightSyncMismatch as exc:
                mismatch = str(exc)
            line = _first_problem(None if mismatch is None else f"{where}: {mismatch}")
        if line is not None:
            result["sync/mismatch"] = line
            return result
        result["sync/verified"] = 1.0
        self.synced_version = version
        return result

    @register(protocol=BuiltinProtocol.DP_COMPUTE_PROTO)
    def generate_sequences(self, prompts: Batch) -> Batch:
        """Responses for this rank's prompts, with ``rollout_log_probs``."""
        seed = prompts.meta.get("sampling_seed")
        if seed is not None:
            torch.manual_seed(int(seed) + 7919 * self.rank)
        out = generate_rollout(self.rollout, prompts)  # a plugin's strategy (agents) too
        if ROLLOUT_LOG_PROBS not in out:
            out[ROLLOUT_LOG_PROBS] = self.source.log_probs(out)
        out.meta["weights_version"] = self.source.weights_version
        out.meta["synced_version"] = self.synced_version
        return out

    # -- partial rollouts -------------------------------------------------------------

    def _segment_rollout(self, tokens: int) -> Any:
        """A rollout of ``tokens`` new tokens whose prompts may hold a response so far."""
        if tokens not in self._segment_rollouts:
            cfg = self.run_config.rollout
            segment = attrs.evolve(
                cfg,
                max_response_length=tokens,
                max_prompt_length=cfg.max_prompt_length + cfg.max_response_length,
            )
            self._segment_rollouts[tokens] = build_rollout(segment, self.source)
        return self._segment_rollouts[tokens]

    @register(protocol=BuiltinProtocol.DP_COMPUTE_PROTO)
    def start_partial(
        self, prompts: Batch, tokens: int, final: bool, seed: int, version: int | None = None
    ) -> Batch:
        """The first segment of ``tokens`` tokens for ``prompts`` (one row per response).

        ``version``: the trainer's policy version of the weights this replica holds (the
        pipeline knows it; a fresh replica's own sync count does not, after a resume or
        a restart); ``None``: the replica's syncs counted from 0.
        """
        rows = len(prompts)
        width = self.run_config.rollout.max_response_length
        pad = self.source.tokenizer.pad_token_id
        partial = prompts.select(
            tensor_keys=["input_ids", "attention_mask"],
            non_tensor_keys=list(prompts.non_tensor_keys),
        )
        partial["partial_responses"] = torch.full((rows, width), pad, dtype=torch.long)
        partial["partial_log_probs"] = torch.zeros(rows, width)
        partial["token_versions"] = torch.full((rows, width), -1.0)
        partial["partial_lengths"] = torch.zeros(rows, dtype=torch.long)
        partial["partial_done"] = torch.zeros(rows, dtype=torch.bool)
        return self.continue_partial(partial, tokens, final, seed, version)

    @register(protocol=BuiltinProtocol.DP_COMPUTE_PROTO)
    def continue_partial(
        self, partial: Batch, tokens: int, final: bool, seed: int, version: int | None = None
    ) -> Batch:
        """Up to ``tokens`` more tokens per unfinished row with the current weights.

        ``final``: return the finished rollout batch (the contract's keys plus
        ``rollout_log_probs`` and ``token_versions``) instead of the partial state.
        ``version``: as in :meth:`start_partial`; the segment's tokens are tagged with it
        and the batch's ``meta['policy_version']`` is the last segment call's (even one that
        sampled nothing, every row having ended).
        """
        torch.manual_seed(int(seed) + 7919 * self.rank)
        partial = self._segment(partial, tokens, version)
        return self._finish(partial) if final else partial

    def _segment(self, partial: Batch, tokens: int, policy_version: int | None = None) -> Batch:
        if policy_version is None:  # the replica's own syncs, the first one being version 0
            policy_version = self.source.weights_version - 1
        # What the weights held are, set even when every row has ended and nothing is sampled:
        # the pipeline checks it against this call's sync count, and each replica rank must
        # tag alike (their batches' meta must agree). The version a token was sampled with is
        # in token_versions.
        partial.meta["policy_version"] = int(policy_version)
        width = self.run_config.rollout.max_response_length
        pad = self.source.tokenizer.pad_token_id
        eos = set(eos_token_ids(list(self.source.generation_eos_ids), self.source.tokenizer))
        active = (~partial["partial_done"]).nonzero().flatten().tolist()
        if not active:
            return partial
        responses = partial["partial_responses"].clone()
        log_probs = partial["partial_log_probs"].clone()
        versions = partial["token_versions"].clone()
        lengths = partial["partial_lengths"].clone()
        done = partial["partial_done"].clone()
        rows = []
        for i in active:
            prompt = partial["input_ids"][i][partial["attention_mask"][i].bool()]
            rows.append(torch.cat([prompt, responses[i, : lengths[i]]]))
        longest = max(len(r) for r in rows)
        ids = torch.full((len(rows), longest), pad, dtype=torch.long)
        mask = torch.zeros((len(rows), longest), dtype=torch.long)
        for j, row in enumerate(rows):  # left-padded, as rollouts take prompts
            ids[j, longest - len(row) :] = row
            mask[j, longest - len(row) :] = 1
        greedy = bool(partial.meta.get("greedy", False))
        segment = Batch.from_dict(
            tensors={"input_ids": ids, "attention_mask": mask}, meta={"n": 1, "greedy": greedy}
        )
        out = self._segment_rollout(tokens).generate_sequences(segment)
        new_log_probs = self.source.log_probs(out)
        version = float(policy_version)
        for j, i in enumerate(active):
            valid = int(out["response_mask"][j].sum())
            take = min(valid, width - int(lengths[i]))
            start = int(lengths[i])
            responses[i, start : start + take] = out["responses"][j, :take]
            log_probs[i, start : start + take] = new_log_probs[j, :take]
            versions[i, start : start + take] = version
            lengths[i] = start + take
            ended = take > 0 and int(out["responses"][j, take - 1]) in eos
            done[i] = ended or lengths[i] >= width or valid < tokens
        partial = partial.select(
            tensor_keys=["input_ids", "attention_mask"],
            non_tensor_keys=list(partial.non_tensor_keys),
        )
        partial.meta["greedy"] = greedy
        partial["partial_responses"] = responses
        partial["partial_log_probs"] = log_probs
        partial["token_versions"] = versions
        partial["partial_lengths"] = lengths
        partial["partial_done"] = done
        partial.meta["policy_version"] = int(policy_version)
        return partial

    def _finish(self, partial: Batch) -> Batch:
        greedy = bool(partial.meta.get("greedy", False))
        prompts = partial.select(
            tensor_keys=["input_ids", "attention_mask"],
            non_tensor_keys=list(partial.non_tensor_keys),
        )
        out = assemble_rollout(
            prompts,
            partial["partial_responses"],
            tokenizer=self.source.tokenizer,
            eos_ids=eos_token_ids(list(self.source.generation_eos_ids), self.source.tokenizer),
            temperature=1.0 if greedy else self.run_config.rollout.temperature,
            greedy=greedy,
            metrics={},
            extra={
                ROLLOUT_LOG_PROBS: partial["partial_log_probs"],
                "token_versions": partial["token_versions"],
            },
        )
        out.meta["weights_version"] = self.source.weights_version
        if "policy_version" in partial.meta:
            out.meta["policy_version"] = partial.meta["policy_version"]
        return out

    @register(protocol=BuiltinProtocol.RANK_ZERO)
    def weights_digest(self) -> dict[str, float]:
        """Each weight's sum (rank 0; its slices on a sliced replica): lets a test
        compare the replica with the actor."""
        return self.source.digest()
