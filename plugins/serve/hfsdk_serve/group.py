"""The controller's side of the serve role: its worker group, started like a run's actor.

:class:`ServeGroup` starts :class:`~.worker.ServeWorker` on a resource pool of
``devices`` device slots through hfsdk's worker runtime (``colocate``), the way
a training session starts a run's roles: with ``executor="auto"`` one device runs
in the server's own process (a :class:`hfsdk.LocalPool`, no Ray),
several devices run as Ray worker processes joined in one gloo/NCCL group. The
server then calls the group's methods (transfer protocols split nothing: every
rank gets the whole request and takes its share) and raises a rank's
:class:`~.worker.Refusal` as an :class:`~hfsdk.HfsdkError` with its one line.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from hfsdk import HfsdkError, load_tokenizer
from hfsdk_serve.adapters import AdapterSpec
from hfsdk_serve.sampling import SampleSpec
from hfsdk_serve.wire import DatumIn, SequenceOut
from hfsdk_serve.worker import Refusal, ServeWorker

log = logging.getLogger(__name__)

Executor = Literal["auto", "local", "ray"]
ROLE = "serve"


def _unwrap(results: Any) -> Any:
    """``results`` (one or per rank) with the first rank's refusal raised as an HfsdkError."""
    items = results if isinstance(results, list) else [results]
    refusals = [r for r in items if isinstance(r, Refusal)]
    if refusals:
        message = next((r.message for r in refusals if r.message), None)
        raise HfsdkError(message or "the request was refused by a rank of the serve group")
    return results


class ServeGroup:
    """The serve role's worker group over ``devices`` device slots (see the module doc)."""

    def __init__(
        self,
        model_dir: str | Path,
        *,
        devices: int = 1,
        executor: Executor = "auto",
        rollout: str = "hf",
        ray_address: str | None = None,
        start_timeout_s: float = 300.0,
    ) -> None:
        from hfsdk import LocalPool, ResourcePool, colocate

        if devices < 1:
            raise HfsdkError(f"--devices {devices}: expected at least 1 device")
        if executor == "local" and devices != 1:
            raise HfsdkError(
                f"--executor local runs the model in the server's process on one device, but "
                f"--devices is {devices}; use --executor ray (or auto) for several devices"
            )
        self.model_dir = Path(model_dir).resolve()
        self.devices = devices
        self.tokenizer = load_tokenizer(self.model_dir)
        in_process = executor == "local" or (executor == "auto" and devices == 1)
        self.rollout = rollout
        role = {ROLE: (ServeWorker, {"model_dir": str(self.model_dir), "rollout": rollout})}
        if in_process:
            # One rank needs no process group, and the server's thread count and environment
            # stay as they are (the in-process host would otherwise set and later reset them).
            self.pool: Any = LocalPool(ROLE)
            groups = colocate(
                self.pool, role, init_distributed=False, start_timeout_s=start_timeout_s
            )
        else:
            from hfsdk import connect_ray, worker_threads

            connect_ray(ray_address)
            threads = worker_threads(0, devices)
            self.pool = ResourcePool(devices_per_node=devices, name=ROLE)
            try:
                groups = colocate(
                    self.pool,
                    role,
                    start_timeout_s=start_timeout_s,
                    env_vars={
                        "OMP_NUM_THREADS": str(threads),
                        "MKL_NUM_THREADS": str(threads),
                        "TOKENIZERS_PARALLELISM": "false",
                        "HF_HUB_OFFLINE": "1",
                    },
                )
            except BaseException:
                self.pool.release()
                raise
        self.group = groups[ROLE]
        self.in_process = in_process
        facts = self.group.describe()
        self.arch: str = facts["arch"]
        self.vocab_size: int = int(facts["vocab_size"])
        self.max_length: int = int(facts["max_length"])
        log.info(
            "hfsdk serve: %d rank(s) %s", devices, "in-process" if in_process else "on Ray workers"
        )

    def close(self) -> None:
        """Stop the workers and give their devices back."""
        group, self.group = getattr(self, "group", None), None
        if group is not None:
            group.shutdown()
            self.pool.release()

    # -- adapters ------------------------------------------------------------------------

    def add(self, name: str, spec: AdapterSpec, *, trainable: bool = True) -> None:
        """A fresh adapter ``name`` on every rank."""
        _unwrap(self.group.add_adapter(name, spec.to_json(), trainable))

    def remove(self, name: str) -> None:
        """Drop adapter ``name`` on every rank."""
        self.group.remove_adapter(name)

    def copy_into(self, source: str, target: str) -> None:
        """Adapter ``target``'s weights := ``source``'s, on every rank."""
        _unwrap(self.group.copy_adapter(source, target))

    def state(self, name: str, *, optimizer: bool) -> dict[str, Any]:
        """Adapter ``name``'s weights (and AdamW state), from rank 0 (all ranks hold the same)."""
        return _unwrap(self.group.adapter_state(name, optimizer))

    def load_state(
        self,
        name: str,
        weights: Mapping[str, torch.Tensor],
        optimizer: Mapping[str, Any] | None,
    ) -> None:
        """Set adapter ``name`` on every rank (``optimizer`` ``None``: a fresh AdamW)."""
        _unwrap(self.group.load_adapter_state(name, dict(weights), optimizer))

    # -- training and sampling -----------------------------------------------------------

    def forward_backward(
        self,
        name: str,
        data: Sequence[DatumIn],
        loss_name: str,
        config: Mapping[str, float | str],
        *,
        backward: bool,
    ) -> tuple[list[dict[str, np.ndarray]], dict[str, float]]:
        """Per datum ``logprobs`` (in request order) and ``loss:sum`` over all ranks."""
        shards = _unwrap(
            self.group.forward_backward(name, list(data), loss_name, dict(config), backward)
        )
        logprobs: list[np.ndarray | None] = [None] * len(data)
        loss = 0.0
        for shard in shards:
            loss += shard["loss"]
            for i, lp in zip(shard["indices"], shard["logprobs"], strict=True):
                logprobs[i] = lp
        assert all(lp is not None for lp in logprobs), "a datum was on no rank"
        return [{"logprobs": lp} for lp in logprobs], {"loss:sum": loss}  # type: ignore[misc]

    def optim_step(self, name: str, params: Mapping[str, float]) -> dict[str, float]:
        """One AdamW step of adapter ``name`` on every rank (gradients summed first)."""
        return _unwrap(self.group.optim_step(name, dict(params)))[0]

    def sample(
        self, name: str | None, spec: SampleSpec
    ) -> tuple[list[SequenceOut], list[float] | None]:
        """Samples of adapter ``name`` (``None``: the base model), generated on rank 0."""
        results = _unwrap(self.group.sample(name, spec))
        return results[0] if isinstance(results, list) else results

    def base_storage(self) -> list[tuple[int, int]]:
        """Per rank: (bytes of base weights it holds, bytes of the whole base model)."""
        results = self.group.base_storage()
        return [tuple(r) for r in (results if isinstance(results, list) else [results])]

    def sampler_reloads(self) -> int:
        """How often rank 0's rollout was given new weights (a vLLM engine reloaded)."""
        return int(self.group.sampler_reloads())
