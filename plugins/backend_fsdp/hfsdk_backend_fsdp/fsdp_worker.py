"""The ``fsdp`` backend's Ray worker: one rank of a role, wrapping that role's engine.

The trainer starts one :class:`FSDPWorker` per device of the role's pool (or
one role object inside a fused multi-role process). Its registered methods
are what the algorithms call on the controller; batches are split across the
data-parallel ranks by the transfer protocols and concatenated on return.
The losses come from the registries, named by the run config, so the worker
does not hard-code any algorithm.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import torch

from hfsdk.core.batch import Batch
from hfsdk.core.errors import HfsdkError
from hfsdk.core.registry import get_registry
from hfsdk.core.workers import Protocol, Worker, register
from hfsdk_backend_fsdp.fsdp_backend import FSDPBackend, engine_kind
from hfsdk_backend_fsdp.objectives import ActorObjective, CriticObjective

RNG_FILE = "rng_rank{rank}.pt"


class FSDPWorker(Worker):
    """A role (actor, reference, critic, cost_critic, reward, cost) trained or served with FSDP2.

    ``section`` is the role's config section; ``assets`` supplies the model and
    tokenizer paths the section leaves out (the built-in default task's).
    """

    def __init__(self, *, role: str, config: Any, assets: Any, section: Any) -> None:
        super().__init__()
        self.role_name = role
        self.run_config = config
        section = attrs.evolve(
            section,
            model_path=section.model_path or assets.model_path,
            tokenizer_path=section.tokenizer_path or assets.tokenizer_path,
        )
        self.kind = engine_kind(role)
        self.engine: Any = FSDPBackend.create_engine(
            role,
            section,
            process_group=self.process_group,
            total_steps=config.trainer.total_steps,
        )
        torch.manual_seed(config.trainer.seed + 1000 * self.rank)
        self.rollout: Any = None
        if self.kind == "actor":
            rollout_entry = get_registry("rollout_backends")[config.rollout.backend]
            self.rollout = rollout_entry.impl(config.rollout, self.engine)

    def _require(self, kind: str, method: str) -> None:
        if self.kind != kind:
            raise HfsdkError(
                f"{method} is an operation of the {kind} role, but this worker is role "
                f"{self.role_name!r} ({self.kind}); call it on the {kind} group"
            )

    # -- rollout and inference -------------------------------------------------------

    @register(protocol=Protocol.DP_COMPUTE_PROTO)
    def generate_sequences(self, prompts: Batch) -> Batch:
        """Responses for ``prompts`` (greedy when ``prompts.meta['greedy']``)."""
        self._require("actor", "generate_sequences")
        return self.rollout.generate_sequences(prompts)

    @register(protocol=Protocol.DP_COMPUTE_PROTO)
    def compute_log_prob(self, batch: Batch) -> Batch:
        """``old_log_probs`` and ``entropys`` of the responses under the current actor."""
        self._require("actor", "compute_log_prob")
        return self.engine.compute_log_prob(batch)

    @register(protocol=Protocol.DP_COMPUTE_PROTO)
    def compute_ref_log_prob(self, batch: Batch) -> Batch:
        """``ref_log_probs`` of the responses under the frozen reference."""
        self._require("reference", "compute_ref_log_prob")
        return self.engine.compute_ref_log_prob(batch)

    @register(protocol=Protocol.DP_COMPUTE_PROTO)
    def compute_values(self, batch: Batch) -> Batch:
        """``values`` (B, R) of the critic."""
        self._require("critic", "compute_values")
        return self.engine.compute_values(batch)

    @register(protocol=Protocol.DP_COMPUTE_PROTO)
    def compute_scores(self, batch: Batch) -> Batch:
        """``rm_scores`` (B,) of a reward or cost model at the last response token."""
        self._require("score", "compute_scores")
        return self.engine.compute_scores(batch)

    # -- training ------------------------------------------------------------------------

    def _norm_length(self) -> float:
        return float(self.run_config.rollout.max_response_length)

    @register(protocol=Protocol.DP_COMPUTE_METRIC)
    def update_actor(self, batch: Batch) -> dict[str, float]:
        """One PPO-style update of the policy with the configured policy loss."""
        self._require("actor", "update_actor")
        cfg = self.run_config
        algo = cfg.algorithm
        objective = ActorObjective(
            policy_loss=get_registry("policy_losses")[algo.policy_loss].impl,
            policy_loss_config=cfg.policy_loss,
            loss_agg_mode=algo.loss_agg_mode,
            kl_estimator=algo.kl_estimator,
            kl_loss_coef=0.0 if algo.kl_in_reward else algo.kl_loss_coef,
            entropy_coef=algo.entropy_coef,
            norm_length=self._norm_length(),
        )
        metrics = self.engine.update_actor(batch, objective)
        self._sync_rollout_weights()
        return metrics

    def _sync_rollout_weights(self) -> None:
        """Hand the actor's current weights to the rollout (in memory, layer by layer).

        The ``hf`` rollout generates on the actor's own module and ignores them;
        a separate engine (``vllm``) reloads them in place.
        """
        if self.rollout is not None:
            self.rollout.update_weights(self.engine.hf_weights())

    @register(protocol=Protocol.DP_COMPUTE_METRIC)
    def update_critic(self, batch: Batch) -> dict[str, float]:
        """One update of the critic towards ``returns`` with the configured value loss."""
        self._require("critic", "update_critic")
        cfg = self.run_config
        objective = CriticObjective(
            value_loss=get_registry("value_losses")[cfg.algorithm.value_loss].impl,
            value_loss_config=cfg.value_loss,
            loss_agg_mode=cfg.algorithm.loss_agg_mode,
            norm_length=self._norm_length(),
        )
        return self.engine.update_critic(batch, objective)

    # -- checkpoints --------------------------------------------------------------------

    @register(protocol=Protocol.ONE_TO_ALL)
    def save_checkpoint(self, directory: str) -> str:
        """Engine state (gathered to rank 0) plus every rank's sampling RNG."""
        path = Path(directory)
        self.engine.save_checkpoint(path)
        torch.save(torch.get_rng_state(), path / RNG_FILE.format(rank=self.rank))
        return str(path)

    @register(protocol=Protocol.ONE_TO_ALL)
    def load_checkpoint(self, directory: str) -> str:
        """Restore what :meth:`save_checkpoint` wrote."""
        path = Path(directory)
        self.engine.load_checkpoint(path)
        if self.kind == "actor":
            self._sync_rollout_weights()
        rng = path / RNG_FILE.format(rank=self.rank)
        if rng.exists():
            torch.set_rng_state(torch.load(rng, weights_only=False))
        return str(path)

    @register(protocol=Protocol.ONE_TO_ALL)
    def export_hf(self, directory: str) -> str:
        """The model in HF format (with its tokenizer) in ``directory``."""
        return str(self.engine.export_hf(directory))
