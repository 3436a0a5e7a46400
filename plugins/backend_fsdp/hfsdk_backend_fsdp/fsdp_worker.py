"""The ``fsdp`` backend's Ray workers: one rank of a role, wrapping that role's engine.

The trainer starts one worker per device of the role's pool (or one role
object inside a fused multi-role process), of the class that serves the role's
declared kind (:data:`WORKER_CLASSES`): each class exposes only the
operations of its kind, so calling ``update_critic`` on the actor's group
fails as an unknown method, not deep inside the worker. Registered methods are
what the algorithms call on the controller; batches are split across the
data-parallel ranks by the transfer protocols and concatenated on return. The
losses come from the registries, named by the run config, and the actor's
extra loss terms from the algorithm's spec, so the workers hard-code no algorithm.
"""

from __future__ import annotations

import functools
from typing import Any, ClassVar

import attrs
import torch

from hfsdk import (
    ActorLossTerms,
    Batch,
    BuiltinProtocol,
    HfsdkError,
    RolloutBackend,
    Worker,
    build_rollout,
    generate_rollout,
    register,
    set_torch_rng_state,
    torch_rng_state,
)
from hfsdk_backend_common.objectives import (
    ActorObjective,
    CriticObjective,
    actor_objective_from,
    critic_objective_from,
)
from hfsdk_backend_common.rollout.replica import RolloutReplicaWorker
from hfsdk_backend_common.weight_sync import WeightSenderMixin
from hfsdk_backend_common.worker_checkpoint import load_rank_checkpoint, save_rank_checkpoint
from hfsdk_backend_fsdp import shared_base
from hfsdk_backend_fsdp.engine import resolve_model_path
from hfsdk_backend_fsdp.engine_factory import create_engine


class FSDPRoleWorker(Worker):
    """What every fsdp role shares: its engine (of :attr:`engine_kind`) and checkpoints.

    ``section`` is the role's config section; ``assets`` supplies the model and
    tokenizer paths the section leaves out (the built-in default task's).
    """

    engine_kind: ClassVar[str]

    def __init__(self, *, role: str, config: Any, assets: Any, section: Any) -> None:
        super().__init__()
        self.role_name = role
        self.run_config = config
        section = attrs.evolve(
            section,
            model_path=section.model_path or assets.model_path,
            tokenizer_path=section.tokenizer_path or assets.tokenizer_path,
        )
        seed = config.trainer.seed + 1000 * self.rank
        # Seeded before the build too: a head the checkpoint lacks (a critic's value head) is
        # initialised there, as it is under fused colocation, where the role built first has
        # already seeded the process; then again, so sampling starts from the seed whatever
        # the build drew.
        torch.manual_seed(seed)
        self.engine: Any = self._build_engine(role, section, config)
        torch.manual_seed(seed)

    def _build_engine(self, role: str, section: Any, config: Any) -> Any:
        """This role's engine (of :attr:`engine_kind`) over the worker's process group."""
        return create_engine(
            role,
            section,
            kind=self.engine_kind,
            process_group=self.process_group,
            total_steps=config.trainer.total_steps,
        )

    # -- checkpoints --------------------------------------------------------------------

    @register(protocol=BuiltinProtocol.ONE_TO_ALL)
    def save_checkpoint(self, directory: str) -> str:
        """Engine state (each rank its shard) plus every rank's sampling RNGs (CPU and CUDA)."""
        return save_rank_checkpoint(self.engine, directory, self.rank, torch_rng_state)

    @register(protocol=BuiltinProtocol.ONE_TO_ALL)
    def load_checkpoint(self, directory: str) -> str:
        """Restore what :meth:`save_checkpoint` wrote."""
        return load_rank_checkpoint(
            self.engine, directory, self.rank, set_torch_rng_state, self._after_load
        )

    def _after_load(self) -> None:
        """Hook for kinds that keep derived state in step with the engine's weights."""

    @register(protocol=BuiltinProtocol.ONE_TO_ALL)
    def export_hf(self, directory: str) -> str:
        """The model in HF format (with its tokenizer) in ``directory``."""
        return str(self.engine.export_hf(directory))


class FSDPPolicyWorker(WeightSenderMixin, FSDPRoleWorker):
    """A ``policy`` role: generation (through the rollout backend), log-probs, updates.

    With a rollout pool of its own it also sends its weights to the replicas
    (:class:`~hfsdk_backend_common.weight_sync.WeightSenderMixin`).

    ``objective`` holds the loss terms the algorithm chose (KL as a loss or
    not, entropy); ``None`` means the plain policy loss.
    """

    engine_kind: ClassVar[str] = "actor"

    def __init__(self, *, objective: ActorLossTerms | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.loss_terms = objective or ActorLossTerms()
        self.rollout: RolloutBackend = build_rollout(self.run_config.rollout, self.engine)
        shared_base.offer(self.engine)  # a LoRA actor's base can serve as the reference

    def close(self) -> None:
        """Release the rollout's engines (vLLM's in-process engine)."""
        self.rollout.close()

    @register(protocol=BuiltinProtocol.DP_COMPUTE_PROTO)
    def generate_sequences(self, prompts: Batch) -> Batch:
        """Responses for ``prompts`` (greedy when ``prompts.meta['greedy']``).

        Through the rollout's generation strategy (a plugin's, e.g. multi-turn agents).
        A call with ``meta['sampling_seed']`` (validation's) samples from that seed (plus
        the rank) and leaves the worker's random generators as they were.
        """
        seed = prompts.meta.get("sampling_seed")
        if seed is None:
            # Training's generations draw from the worker's own stream, call after call;
            # seeded_rng(None) would fork and restore it, so every step would repeat its draws.
            return generate_rollout(self.rollout, prompts)
        from hfsdk import seeded_rng

        # The rollout samples from this process's global generators, which training's
        # generations share: a seeded call must not move them, or validating changes training.
        with seeded_rng(int(seed) + 7919 * self.rank):
            return generate_rollout(self.rollout, prompts)

    @register(protocol=BuiltinProtocol.DP_COMPUTE_PROTO)
    def compute_log_prob(self, batch: Batch) -> Batch:
        """``old_log_probs`` and ``entropys`` of the responses under the current actor."""
        return self.engine.compute_log_prob(batch)

    @functools.cached_property
    def actor_objective(self) -> ActorObjective:
        """The policy loss, its settings and the corrections, resolved once per run."""
        return actor_objective_from(self.run_config, self.loss_terms)

    @register(protocol=BuiltinProtocol.DP_COMPUTE_METRIC)
    def update_actor(self, batch: Batch) -> dict[str, float]:
        """One PPO-style update of the policy with the configured policy loss."""
        metrics = self.engine.update_actor(batch, self.actor_objective)
        self._sync_rollout_weights()
        return metrics

    def _sync_rollout_weights(self) -> None:
        """Tell the rollout the actor's weights changed (a rollout with its own copy reloads)."""
        self.rollout.update_weights(self.engine)

    def _after_load(self) -> None:
        self._sync_rollout_weights()


class FSDPReferenceWorker(FSDPRoleWorker):
    """A ``frozen_policy`` role: log-probs under the frozen reference."""

    engine_kind: ClassVar[str] = "reference"

    def _build_engine(self, role: str, section: Any, config: Any) -> Any:
        """The LoRA actor's base when it lives in this process (:mod:`.shared_base`)."""
        actor = shared_base.find(resolve_model_path(section, role), self.process_group, section)
        if actor is not None:
            return shared_base.BaseOfLoraActor(actor)
        return super()._build_engine(role, section, config)

    @register(protocol=BuiltinProtocol.DP_COMPUTE_PROTO)
    def compute_ref_log_prob(self, batch: Batch) -> Batch:
        """``ref_log_probs`` of the responses under the frozen reference."""
        return self.engine.compute_ref_log_prob(batch)


class FSDPValueWorker(FSDPRoleWorker):
    """A ``value`` role: a critic's values and its update."""

    engine_kind: ClassVar[str] = "critic"

    @functools.cached_property
    def critic_objective(self) -> CriticObjective:
        """The value loss and its settings, resolved once per run."""
        return critic_objective_from(self.run_config)

    @register(protocol=BuiltinProtocol.DP_COMPUTE_PROTO)
    def compute_values(self, batch: Batch) -> Batch:
        """``values`` (B, R) of the critic."""
        return self.engine.compute_values(batch)

    @register(protocol=BuiltinProtocol.DP_COMPUTE_METRIC)
    def update_critic(self, batch: Batch) -> dict[str, float]:
        """One update of the critic towards ``returns`` with the configured value loss."""
        objective = self.critic_objective
        return self.engine.update_critic(batch, objective)


class FSDPScorerWorker(FSDPRoleWorker):
    """A ``scorer`` role's model (a reward or cost model)."""

    engine_kind: ClassVar[str] = "score"

    @register(protocol=BuiltinProtocol.DP_COMPUTE_PROTO)
    def compute_scores(self, batch: Batch) -> Batch:
        """``rm_scores`` (B,) of a reward or cost model at the last response token."""
        return self.engine.compute_scores(batch)


class FSDPScoreModelWorker(FSDPScorerWorker):
    """A ``score_model`` role: a reward or cost model being trained.

    ``objective`` is the algorithm's loss (``AlgorithmSpec.score_objective``),
    e.g. Bradley-Terry on preference pairs; the backend hard-codes none.
    """

    engine_kind: ClassVar[str] = "score_model"

    def __init__(self, *, objective: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.objective = objective

    @register(protocol=BuiltinProtocol.DP_COMPUTE_METRIC)
    def update_score_model(self, batch: Batch) -> dict[str, float]:
        """One update of the scorer with the algorithm's loss (``score_model/*`` metrics)."""
        if self.objective is None:
            raise HfsdkError(
                f"{self.role_name} was started without a loss; the algorithm's spec must give "
                "score_objective"
            )
        return self.engine.update_score_model(batch, self.objective)


WORKER_CLASSES: dict[str, type[Worker]] = {
    "policy": FSDPPolicyWorker,
    "frozen_policy": FSDPReferenceWorker,
    "value": FSDPValueWorker,
    "scorer": FSDPScorerWorker,
    "score_model": FSDPScoreModelWorker,
    "rollout": RolloutReplicaWorker,
}
"""The worker class of each role kind (``rollout``: a replica on ``placement.pools.rollout``)."""
