"""The ``megatron`` backend's Ray worker: one (pp, tp, dp) rank of a role.

The worker declares its place in the ``train`` mesh (Megatron's rank order:
tp fastest, then dp, then pp) and registers its operations with
``MESH_PROTO``: a batch is split by data-parallel replica, every tp/pp rank
of a replica receives that replica's rows, and the controller collects the
result of tensor-parallel rank 0 on the last pipeline stage. The updates
return metrics through ``MESH_METRIC`` (the same dispatch, metrics averaged
over the collected ranks). The worker operations, losses and checkpoint
layout of the run directory are those of the ``fsdp`` worker, so an
algorithm switches backend by changing ``<role>.backend``.
"""

from __future__ import annotations

import functools
from typing import Any, ClassVar

import attrs
import torch

from hfsdk import (
    ActorLossTerms,
    Batch,
    DispatchContext,
    DispatchPlan,
    HfsdkError,
    RolloutBackend,
    TransferProtocol,
    Worker,
    build_rollout,
    check_mesh,
    collect_mean_metrics,
    generate_rollout,
    register,
    split_rows,
)
from hfsdk import BuiltinProtocol as Protocol
from hfsdk_backend_common.engine_support import ENGINE_OF_ROLE_KIND
from hfsdk_backend_common.objectives import (
    ActorObjective,
    CriticObjective,
    actor_objective_from,
    critic_objective_from,
)
from hfsdk_backend_common.rollout.replica import RolloutReplicaWorker
from hfsdk_backend_common.weight_sync import WeightSenderMixin
from hfsdk_backend_common.worker_checkpoint import load_rank_checkpoint, save_rank_checkpoint
from hfsdk_backend_megatron.rng import megatron_rng_state, set_megatron_rng_state

MESH = "train"


def dispatch_mesh_train(
    ctx: DispatchContext, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> DispatchPlan:
    """``MESH_PROTO``'s split by dp replica, each piece marked with its padding rows.

    Every rank of a replica gets that replica's piece (so its tp/pp ranks run
    the same collectives); the collecting ranks (tp 0 of the last stage) answer.
    """
    positions = ctx.mesh()
    _, _, dp = check_mesh(ctx, positions)
    per_args, per_kwargs, pad = split_rows(ctx, args, kwargs, dp, kind="batch", mark_padding=True)
    calls = {r: (per_args[p.dp_rank], per_kwargs[p.dp_rank]) for r, p in enumerate(positions)}
    collectors = tuple(
        r for _, r in sorted((p.dp_rank, r) for r, p in enumerate(positions) if p.collects)
    )
    return DispatchPlan(calls=calls, collect_ranks=collectors, pad=pad)


MESH_METRIC = TransferProtocol(
    name="mesh_metric",
    dispatch=dispatch_mesh_train,
    collect=collect_mean_metrics,
    layout="other",
    doc="MESH_PROTO's split by dp rank (padding rows marked); collectors' metrics averaged.",
)
"""Updates: each dp replica trains on its rows; metrics come from each replica's collector."""


class MegatronWorker(Worker):
    """A role (actor, reference, critic, cost_critic, reward, cost) on megatron-core.

    ``section`` is the role's :class:`MegatronRoleConfig`; ``assets`` fills
    the model and tokenizer paths it leaves out (the built-in default task's).
    """

    engine_kind: ClassVar[str | None] = None
    """The engine kind this class serves (set by the per-kind subclasses below)."""

    def __init__(
        self,
        *,
        role: str,
        config: Any,
        assets: Any,
        section: Any,
        objective: ActorLossTerms | None = None,
    ) -> None:
        super().__init__()
        from hfsdk_backend_megatron.engine import MegatronEngine

        if self.engine_kind is None:
            raise HfsdkError(
                f"start role {role!r} with the megatron worker of its declared kind "
                "(MegatronBackend.worker_class(kind)), not MegatronWorker itself"
            )
        self.loss_terms = objective or ActorLossTerms()

        self.role_name = role
        self.run_config = config
        section = attrs.evolve(
            section,
            model_path=section.model_path or assets.model_path,
            tokenizer_path=section.tokenizer_path or assets.tokenizer_path,
        )
        self.kind = self.engine_kind
        self.engine = MegatronEngine(
            section, role=role, kind=self.kind, total_steps=config.trainer.total_steps
        )
        self.declare_mesh(MESH, pp=self.engine.pp, tp=self.engine.tp, dp=self.engine.dp_size)
        torch.manual_seed(config.trainer.seed + 1000 * self.rank)

    @property
    def _collects(self) -> bool:
        position = self.mesh_position(MESH)
        return position is not None and position.collects

    def close(self) -> None:
        """Drop megatron-core's model-parallel groups (an in-process run can start again)."""
        from megatron.core import parallel_state

        if parallel_state.model_parallel_is_initialized():
            parallel_state.destroy_model_parallel()

    # -- checkpoints --------------------------------------------------------------------

    @register(protocol=Protocol.ONE_TO_ALL)
    def save_checkpoint(self, directory: str) -> str:
        """Each (pp, tp) shard of replica 0 in its own file, plus every rank's RNGs.

        The RNGs are CPU, CUDA and megatron's model-parallel tracker (see
        :mod:`hfsdk_backend_megatron.rng`), so a resumed GPU run samples alike.
        """
        return save_rank_checkpoint(self.engine, directory, self.rank, megatron_rng_state)

    @register(protocol=Protocol.ONE_TO_ALL)
    def load_checkpoint(self, directory: str) -> str:
        """Restore :meth:`save_checkpoint`'s files (written at this or another layout)."""
        return load_rank_checkpoint(
            self.engine, directory, self.rank, set_megatron_rng_state, self._after_load
        )

    @register(protocol=Protocol.ONE_TO_ALL)
    def export_hf(self, directory: str) -> str:
        """The model in HF format (with its tokenizer) in ``directory``."""
        return str(self.engine.export_hf(directory))

    def _after_load(self) -> None:
        """What a role does once its weights are restored (the policy's rollout reloads)."""

    @register(protocol=Protocol.ONE_TO_ALL)
    def layout(self) -> dict[str, int]:
        """This rank's (tp, pp, dp) sizes and ranks."""
        return self.engine.layout()


class MegatronPolicyWorker(WeightSenderMixin, MegatronWorker):
    """A ``policy`` role on megatron-core: generation (the rollout contract), log-probs, updates.

    With a rollout pool of its own it also sends its weights (gathered to HF names layer by
    layer, ``hf_weights``) to the replicas
    (:class:`~hfsdk_backend_common.weight_sync.WeightSenderMixin`).
    """

    engine_kind: ClassVar[str | None] = ENGINE_OF_ROLE_KIND["policy"]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # The engine is the rollout contract's actor (3D-HybridEngine shards when the
        # model is supported, HF-named weights gathered layer by layer otherwise).
        self.rollout: RolloutBackend = build_rollout(self.run_config.rollout, self.engine)

    def close(self) -> None:
        """Release the rollout's engines (vLLM's in-process engine), then the groups."""
        self.rollout.close()
        super().close()

    @register(protocol=Protocol.MESH_PROTO, mesh=MESH)
    def generate_sequences(self, prompts: Batch) -> Batch:
        """Responses for ``prompts``; the collector's (tp 0, last stage) are returned.

        A collective rollout runs on every rank (reshards, tensor-parallel
        decoding, gathered weights); otherwise only the collectors generate. A call with
        ``meta['sampling_seed']`` (validation's) samples from that seed (plus the rank) and
        leaves the worker's random generators as they were.
        """
        seed = prompts.meta.get("sampling_seed")
        if seed is None:
            # Training's generations draw from the worker's own stream, call after call;
            # seeded_rng(None) would fork and restore it, so every step would repeat its draws.
            return self._generate(prompts)
        from hfsdk import seeded_rng

        # The rollout samples from this process's global generators, which training's
        # generations share: a seeded call must not move them, or validating changes training.
        with seeded_rng(int(seed) + 7919 * self.rank):
            return self._generate(prompts)

    def _generate(self, prompts: Batch) -> Batch:
        """:meth:`generate_sequences`'s rows, from the generators as they stand."""
        if self.rollout.collective:
            out = generate_rollout(self.rollout, prompts)
            return out if self._collects else prompts
        if not self._collects:
            return prompts  # not collected
        return generate_rollout(self.rollout, prompts)

    @register(protocol=Protocol.MESH_PROTO, mesh=MESH)
    def compute_log_prob(self, batch: Batch) -> Batch:
        """``old_log_probs`` and ``entropys`` of the responses under the current actor."""
        return self.engine.compute_log_prob(batch)

    @functools.cached_property
    def actor_objective(self) -> ActorObjective:
        """The policy loss, its settings and the corrections, resolved once per run."""
        return actor_objective_from(self.run_config, self.loss_terms)

    @register(protocol=MESH_METRIC, mesh=MESH)
    def update_actor(self, batch: Batch) -> dict[str, float]:
        """One PPO-style update of the policy with the configured policy loss."""
        metrics = self.engine.update_actor(batch, self.actor_objective)
        self._after_load()  # the rollout reloads what it keeps
        return metrics

    def _after_load(self) -> None:
        """Tell the rollout the actor's weights changed (a rollout with its own copy reloads)."""
        self.rollout.update_weights(self.engine)


class MegatronReferenceWorker(MegatronWorker):
    """A ``frozen_policy`` role on megatron-core."""

    engine_kind: ClassVar[str | None] = ENGINE_OF_ROLE_KIND["frozen_policy"]

    @register(protocol=Protocol.MESH_PROTO, mesh=MESH)
    def compute_ref_log_prob(self, batch: Batch) -> Batch:
        """``ref_log_probs`` of the responses under the frozen reference."""
        return self.engine.compute_ref_log_prob(batch)


class MegatronValueWorker(MegatronWorker):
    """A ``value`` role on megatron-core."""

    engine_kind: ClassVar[str | None] = ENGINE_OF_ROLE_KIND["value"]

    @functools.cached_property
    def critic_objective(self) -> CriticObjective:
        """The value loss and its settings, resolved once per run."""
        return critic_objective_from(self.run_config)

    @register(protocol=Protocol.MESH_PROTO, mesh=MESH)
    def compute_values(self, batch: Batch) -> Batch:
        """``values`` (B, R) of the critic."""
        return self.engine.compute_values(batch)

    @register(protocol=MESH_METRIC, mesh=MESH)
    def update_critic(self, batch: Batch) -> dict[str, float]:
        """One update of the critic towards ``returns`` with the configured value loss."""
        objective = self.critic_objective
        return self.engine.update_critic(batch, objective)


class MegatronScorerWorker(MegatronWorker):
    """A ``scorer`` role's model on megatron-core."""

    engine_kind: ClassVar[str | None] = ENGINE_OF_ROLE_KIND["scorer"]

    @register(protocol=Protocol.MESH_PROTO, mesh=MESH)
    def compute_scores(self, batch: Batch) -> Batch:
        """``rm_scores`` (B,) of a reward or cost model at the last response token."""
        return self.engine.compute_scores(batch)


class MegatronScoreModelWorker(MegatronScorerWorker):
    """A ``score_model`` role on megatron-core: a reward or cost model being trained.

    ``objective`` is the algorithm's loss (``AlgorithmSpec.score_objective``).
    """

    engine_kind: ClassVar[str | None] = ENGINE_OF_ROLE_KIND["score_model"]

    def __init__(self, *, objective: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.score_loss = objective

    @register(protocol=MESH_METRIC, mesh=MESH)
    def update_score_model(self, batch: Batch) -> dict[str, float]:
        """One update of the scorer with the algorithm's loss (``score_model/*`` metrics)."""
        if self.score_loss is None:
            raise HfsdkError(
                f"{self.role_name} was started without a loss; the algorithm's spec must give "
                "score_objective"
            )
        return self.engine.update_score_model(batch, self.score_loss)


class MegatronBackend:
    """megatron-core TP/PP training backend: the worker class of each declared role kind."""

    @staticmethod
    def worker_class(role_kind: str) -> type[Worker]:
        """The worker class that runs a role of ``role_kind``."""
        classes = {
            "policy": MegatronPolicyWorker,
            "frozen_policy": MegatronReferenceWorker,
            "value": MegatronValueWorker,
            "scorer": MegatronScorerWorker,
            "score_model": MegatronScoreModelWorker,
            "rollout": RolloutReplicaWorker,  # a replica on placement.pools.rollout
        }
        if role_kind not in classes:
            raise HfsdkError(
                f"the megatron backend serves role kinds {sorted(classes)}, not {role_kind!r}"
            )
        return classes[role_kind]
