"""A training session: assets, data, Ray worker groups per pool, and reward/cost signals.

The session turns the run config into live objects for the trainer loop and
tears them down afterwards: it resolves the built-in default task when the
config names no model or data, builds one resource pool per
``placement.pools`` entry, starts each pool's roles (fused into one process
per device, or as separate processes) with the training backend each role
selects, and builds the scorers of the ``reward`` and ``cost`` signals.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from hfsdk.core.algorithm_spec import AlgorithmSpec
from hfsdk.core.config.run_config import RunConfig
from hfsdk.core.errors import HfsdkError
from hfsdk.core.trainer.placement_config import NO_PLACEMENT_PLUGIN, ROLLOUT_POOL
from hfsdk.core.trainer.run_assets import SignalScorer
from hfsdk.core.trainer.threads import worker_threads
from hfsdk.core.trainer.validation import ValidationResult
from hfsdk.core.workers.futures import CallClock

logger = logging.getLogger(__name__)


_WORKER_ENV = {
    "TOKENIZERS_PARALLELISM": "false",
    "TRANSFORMERS_VERBOSITY": "error",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "HF_HUB_OFFLINE": "1",
}


def local_executor_problem(cfg: Any, placement: Any, pools_in_use: Mapping[str, Any]) -> str | None:
    """Why the run's workers cannot live in the controller's process (``None``: they can)."""
    from hfsdk.core.workers.ray_runtime import resolve_address

    if len(pools_in_use) != 1:
        return f"the roles use {len(pools_in_use)} pools; in-process workers need one"
    pool = placement.pools[next(iter(pools_in_use))]
    if pool.devices != 1 or pool.nodes != 1:
        return f"the pool has {pool.devices} devices on {pool.nodes} node(s); in-process needs one"
    if placement.colocation != "fused":
        return "placement.colocation is separate; in-process workers are fused"
    if resolve_address(cfg.trainer.ray_address) is not None:
        return "a Ray cluster address is set (trainer.ray_address or RAY_ADDRESS)"
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return "torch.distributed is already initialised in the controller's process"
    return None


def use_local_executor(cfg: Any, placement: Any, pools_in_use: Mapping[str, Any]) -> bool:
    """``trainer.executor`` resolved: ``True`` runs the workers in the controller's process."""
    choice = cfg.trainer.executor
    if choice == "ray":
        return False
    problem = local_executor_problem(cfg, placement, pools_in_use)
    if choice == "local" and problem is not None:
        raise HfsdkError(
            f"trainer.executor=local: {problem}; use one pool of one device with fused roles, "
            "or set trainer.executor: ray (or auto)"
        )
    return problem is None


class TrainingSession:
    """Live objects of one run: ``loader``, ``roles`` (worker groups) and ``signals``.

    ``spec`` is the algorithm's :class:`~hfsdk.core.algorithm_spec.AlgorithmSpec`:
    its roles (and their kinds) are what the session starts. ``prepared`` is what
    :func:`~hfsdk.core.trainer.preflight.prepare_run` already built and checked.
    """

    def __init__(
        self, config: RunConfig, spec: AlgorithmSpec, *, prepared: Any | None = None
    ) -> None:
        self.config = config
        self.spec = spec
        self.prepared = prepared
        self.role_names = spec.role_names
        self.groups: dict[str, Any] = {}
        self.pools: list[Any] = []
        self.signals: dict[str, SignalScorer] = {}
        self.rollout: Any = None
        """The ``rollout`` replicas' worker group on ``placement.pools.rollout`` (or ``None``)."""
        self.clock = CallClock()
        """Times the blocking calls of every group this session starts (the trainer's
        ``perf/controller_overhead_s``)."""
        self.worker_threads = 0
        """Intra-op threads each worker runs with, as :func:`worker_threads` decided them
        when the workers started (0 before); placement plugins price the run's devices with it."""

    # -- lifecycle ----------------------------------------------------------------

    def __enter__(self) -> TrainingSession:
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start(self) -> None:
        from hfsdk.core.trainer.preflight import prepare_run

        # Assets, data and reward functions are checked before any worker starts.
        prepared = self.prepared or prepare_run(self.config, self.spec)
        self.assets = prepared.assets
        self.tokenizer = prepared.tokenizer
        self.loader = prepared.loader
        self.val_loader = prepared.val_loader
        self._start_workers()
        for role, signal in prepared.signal_configs.items():
            self.signals[role] = SignalScorer(
                role, signal, self.groups.get(role), prepared.reward_scorers.get(role)
            )

    @property
    def roles(self) -> dict[str, Any]:
        """Role name -> worker group, what algorithms call (the same objects as ``groups``)."""
        return self.groups

    def _model_roles(self) -> dict[str, Any]:
        """Role name -> role section for every role that runs a model."""
        out = {}
        for role in self.role_names:
            section = getattr(self.config, role)
            if self.spec.kind_of(role) == "scorer":
                if section.model is not None:
                    out[role] = section.model
            else:
                out[role] = section
        return out

    def _start_workers(self) -> None:
        from hfsdk.core.backends import worker_class
        from hfsdk.core.plugin_manager import get_registry
        from hfsdk.core.workers import connect

        cfg = self.config
        placement = cfg.placement
        self._planned_rollout_tp: dict[str, int] = {}
        if placement.mode == "auto":
            placement = self._auto_placement()
        backends = get_registry("training_backends")
        by_pool: dict[str, dict[str, Any]] = {}
        for role, section in self._model_roles().items():
            kind = self.spec.kind_of(role)
            planned_tp = self._planned_rollout_tp.get(role)
            if planned_tp and hasattr(section, "rollout_layout"):
                # placement: auto chose a rollout layout; the hybrid engine takes it if it fits.
                layout = attrs.evolve(section.rollout_layout, planned_tp=planned_tp)
                section = attrs.evolve(section, rollout_layout=layout)
            worker_cls = worker_class(backends[section.backend], role, kind)
            kwargs = {"role": role, "config": cfg, "assets": self.assets, "section": section}
            if kind == "policy":  # the algorithm, not the backend, decides the loss terms
                kwargs["objective"] = self.spec.actor_objective(cfg.algorithm)
            elif kind == "score_model":
                if self.spec.score_objective is None:
                    raise HfsdkError(
                        f"algorithm {self.spec.name!r} trains {role!r} (kind 'score_model') "
                        "but its spec has no score_objective; set AlgorithmSpec.score_objective"
                    )
                kwargs["objective"] = self.spec.score_objective(cfg.algorithm)
            by_pool.setdefault(placement.pool_of(role), {})[role] = (worker_cls, kwargs)
        if ROLLOUT_POOL in placement.pools:  # a disaggregated rollout (docs/async.md)
            # Its settings were checked in preflight (a plugin's check of the rollout pool).
            section = getattr(cfg, self.spec.policy_role)
            worker_cls = worker_class(backends[section.backend], ROLLOUT_POOL, "rollout")
            kwargs = {"role": ROLLOUT_POOL, "config": cfg, "assets": self.assets}
            kwargs["section"] = section  # the replicas load the actor's model
            by_pool.setdefault(ROLLOUT_POOL, {})[ROLLOUT_POOL] = (worker_cls, kwargs)
        fused = placement.colocation == "fused"
        from hfsdk.core.trainer.preflight import startup_deadline_s
        from hfsdk.core.workers.futures import DATA_TIMEOUT_ENV

        start_timeout_s = startup_deadline_s(cfg, self.spec, self.assets)
        # Device slots per node over every pool in use: the workers that run at once.
        slots = sum(
            placement.pools[name].devices // placement.pools[name].nodes for name in by_pool
        )
        in_process = use_local_executor(cfg, placement, by_pool)
        threads = self.worker_threads = worker_threads(cfg.trainer.worker_threads, slots)
        from hfsdk.core.logs import DIR_ENV, LEVEL_ENV
        from hfsdk.core.trainer.faults import FAULT_ENV

        env_vars = {
            **_WORKER_ENV,
            # Workers log at the controller's level, into its run directory (hfsdk.core.logs),
            # and meet the faults injected in worker processes (reshard_drop).
            **{k: os.environ[k] for k in (LEVEL_ENV, DIR_ENV, FAULT_ENV) if k in os.environ},
            "OMP_NUM_THREADS": str(threads),
            "MKL_NUM_THREADS": str(threads),
            DATA_TIMEOUT_ENV: str(cfg.trainer.worker_timeout_s),
        }
        if cfg.trainer.deterministic:
            from hfsdk.core.determinism import determinism_env

            env_vars.update(determinism_env(cfg.trainer.seed))
        logger.info(
            "workers: %s, %d intra-op thread(s) each (%d device slot(s))",
            "in the controller's process" if in_process else "Ray processes",
            threads,
            slots,
        )
        if not in_process:
            connect(cfg.trainer.ray_address, allow_no_auth=cfg.trainer.ray_allow_no_auth)
        options = {
            "in_process": in_process,
            "fused": fused,
            "start_timeout_s": start_timeout_s,
            "call_timeout_s": cfg.trainer.worker_timeout_s,
            "env_vars": env_vars,
        }
        for pool_name, roles in by_pool.items():
            if not in_process:
                pool_cfg = placement.pools[pool_name]
                logger.info(
                    "starting %s on pool %r: %d device slot(s), %s worker processes (building "
                    "the models; startup deadline %.0f s) ...",
                    ", ".join(roles), pool_name, pool_cfg.devices,
                    "fused" if fused else "one per role and device", start_timeout_s,
                )  # fmt: skip
            groups = self._start_pool(placement.pools[pool_name], pool_name, roles, options)
            if pool_name == ROLLOUT_POOL:
                self.rollout = groups.pop(ROLLOUT_POOL)
                self._rollout_start = (placement.pools[pool_name], roles, options)
            self.groups.update(groups)

    def _start_pool(
        self, pool_cfg: Any, pool_name: str, roles: dict[str, Any], options: Mapping[str, Any]
    ) -> dict[str, Any]:
        """One pool's resources and its roles' worker groups (the pool is kept in ``pools``)."""
        from hfsdk.core.workers import LocalPool, ResourcePool, colocate

        fused = options["fused"]
        pool = (
            LocalPool(pool_name)
            if options["in_process"]
            else ResourcePool(
                devices_per_node=pool_cfg.devices // pool_cfg.nodes,
                nodes=pool_cfg.nodes,
                name=pool_name,
                max_colocate=1 if fused else len(roles),
            )
        )
        self.pools.append(pool)
        groups = colocate(
            pool,
            roles,
            fused=fused,
            start_timeout_s=options["start_timeout_s"],
            call_timeout_s=options["call_timeout_s"],
            env_vars=options["env_vars"],
        )
        for group in groups.values():
            group.clock = self.clock
        return groups

    def restart_rollout(self) -> Any:
        """Replace the rollout replicas' worker group with a fresh one on a fresh pool.

        The old group is shut down and its pool released first (a dead replica's
        peers are killed with it); the new replicas load the actor's model
        directory, so they need a weight sync before they generate. The algorithm
        roles are not touched.
        """
        if self.rollout is None:
            raise HfsdkError("restart_rollout: this session has no rollout pool")
        old, self.rollout = self.rollout, None
        pool = old.pool
        try:
            old.shutdown()
        except Exception:  # the group is already broken; what matters is that it is gone
            logger.debug("rollout group shutdown failed", exc_info=True)
        if pool in self.pools:
            self.pools.remove(pool)
            pool.release()
        pool_cfg, roles, options = self._rollout_start
        self.rollout = self._start_pool(pool_cfg, ROLLOUT_POOL, roles, options)[ROLLOUT_POOL]
        return self.rollout

    def _auto_placement(self) -> Any:
        """``placement.mode=auto``: a placement plugin (``hfsdk_resolve_placement``) splits
        the configured devices among the roles; resolved once, before any worker starts."""
        from hfsdk.core.plugin_manager import get_plugin_manager
        from hfsdk.core.trainer.placement_config import PoolConfig

        placement = self.config.placement
        section = get_plugin_manager().hook.hfsdk_resolve_placement(config=self.config)
        if section is None:
            raise HfsdkError(NO_PLACEMENT_PLUGIN)
        self._planned_rollout_tp = dict(section.get("rollout_tp", {}))
        pools = {name: PoolConfig(**p) for name, p in section["pools"].items()}  # nodes too
        return attrs.evolve(placement, mode="manual", pools=pools, roles=section["roles"])

    def close(self) -> None:
        """Stop every worker group and release the pools."""
        groups = [*self.groups.values(), *([self.rollout] if self.rollout is not None else [])]
        self.rollout = None
        for group in groups:
            try:
                group.shutdown()
            except Exception:  # shutting down after a failure must not hide it
                logger.debug("worker group shutdown failed", exc_info=True)
        for pool in self.pools:
            try:
                pool.release()
            except Exception:
                logger.debug("pool release failed", exc_info=True)
        self.groups.clear()
        self.pools.clear()

    # -- checkpoints ----------------------------------------------------------------

    def _stateful(self) -> Mapping[str, Any]:
        return {r: g for r, g in self.groups.items() if self.spec.kind_of(r) != "scorer"}

    def save_workers(self, directory: Path, *, export_hf: bool = True) -> None:
        """Trained roles save under ``directory/<role>``; the policy also in HF format if asked."""
        for role, group in self._stateful().items():
            group.save_checkpoint(str(directory / role))
        if export_hf:
            policy = self.spec.main_role
            self.groups[policy].export_hf(str(directory / f"{policy}_hf"))

    def load_workers(self, directory: Path) -> None:
        """Restore every trained role from ``directory/<role>``."""
        for role, group in self._stateful().items():
            path = directory / role
            if not path.exists():
                raise HfsdkError(
                    f"checkpoint {str(directory)!r} has no state for role {role!r}; it was "
                    "written by a run with other roles — use a new --run-dir"
                )
            group.load_checkpoint(str(path))

    # -- validation -------------------------------------------------------------------

    def validate(self, algorithm: Any) -> ValidationResult | None:
        """``hfsdk_validate``'s metrics on the validation set, with the algorithm's own."""
        if self.val_loader is None:
            return None
        from hfsdk.core.plugin_manager import get_plugin_manager

        prompts = self.val_loader.whole()
        if not self.spec.has_policy or not self.signals:  # nothing samples, or nothing scores
            return ValidationResult(metrics=algorithm.validation_metrics(prompts), samples=[])
        scorer = self.signals.get("reward") or next(iter(self.signals.values()))
        result = get_plugin_manager().hook.hfsdk_validate(
            algorithm=algorithm, prompts=prompts, scorer=scorer, trainer_config=self.config.trainer
        )
        if result is None:  # the preflight refused a run without the plugin; a plugin said None
            raise HfsdkError("trainer.val_every: every hfsdk_validate answered None")
        extra = algorithm.validation_metrics(prompts)
        if not extra:
            return result
        return attrs.evolve(result, metrics={**result.metrics, **extra})
