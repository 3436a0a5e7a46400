"""A module holding an actor's current full weights for one generation call, whatever the
actor offers: its own module (zero copy), its module gathered (``weight_sync: gather``), or a
module of its architecture filled from :meth:`hfsdk.ActorSource.hf_weights` and freed after
the call (merged LoRA weights checked against the actor's probes). The ``hf`` rollout and any
rollout that decodes with transformers on the actor's weights (the vision plugin's
``hf_vision``) share it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import torch

from hfsdk import ActorSource, HfsdkError
from hfsdk_backend_common.rollout import generation_module
from hfsdk_backend_common.weight_check import ProbeCheck, WeightSyncMismatch


class ActorWeights:
    """The actor's weights as a module, one call at a time (see the module docstring).

    ``weight_sync`` is the rollout's: ``gather`` lets a sharded actor gather into its own
    module, ``stream`` fills a generation module from ``hf_weights``. The generation module
    is built once (no weights) and holds weights only inside :meth:`module`.
    """

    def __init__(self, actor: ActorSource, weight_sync: str = "stream") -> None:
        self.actor = actor
        self.weight_sync = weight_sync
        self.last_metrics: dict[str, float] = {}
        self._module: torch.nn.Module | None = None

    @contextlib.contextmanager
    def module(self) -> Iterator[torch.nn.Module]:
        """A module with the actor's current full weights for one call; collective over the
        actor's ranks. Sets :attr:`last_metrics` (the transition's cost on this rank)."""
        actor = self.actor
        started = time.perf_counter()
        dp = actor.dp.size
        with actor.live_hf_module(gather=self.weight_sync == "gather") as live:
            if live is not None:
                full = generation_module.parameter_bytes(live)
                self.last_metrics = {
                    "timing/reshard_s": time.perf_counter() - started,
                    "perf/reshard_bytes": full * (dp - 1) / dp,
                    "perf/reshard_peak_extra_bytes": float(full if dp > 1 else 0),
                }
                # A gathered module was checked against its shards by the actor (sync/...).
                self.last_metrics.update(
                    (k, v) for k, v in actor.last_weights_metrics.items() if k.startswith("sync/")
                )
                yield live
                return
        module = self._generation_module()
        try:
            with torch.no_grad():
                generation_module.materialize(module, actor.device, actor.compute_dtype)
                targets = dict(module.named_parameters())
                filled = set()
                # The weights the actor computed (a LoRA merge) are checked as held here.
                merges = ProbeCheck(lambda: actor.weight_probes)
                for name, tensor in actor.hf_weights():
                    if name not in targets:
                        raise HfsdkError(
                            f"the actor's weight {name!r} has no parameter in the generation "
                            f"module ({type(module).__name__}); hf_weights must yield the names "
                            "of transformers' named_parameters()"
                        )
                    targets[name].copy_(tensor)
                    merges.observe(name, targets[name])
                    filled.add(name)
            missing = sorted(set(targets) - filled)
            if missing:
                raise HfsdkError(
                    f"the actor's hf_weights() left {len(missing)} generation weights unset "
                    f"(first: {missing[0]!r}); it must yield every parameter once"
                )
            problem = merges.problem()
            if problem is not None:
                raise WeightSyncMismatch(
                    f"the generation module of the actor's weights version "
                    f"{actor.weights_version} does not hold the actor's merged weights: "
                    f"{problem}; it would generate with weights other than the actor's"
                )
            own = generation_module.parameter_bytes(module)
            reported = dict(actor.last_weights_metrics)
            self.last_metrics = {
                "timing/reshard_s": time.perf_counter() - started,
                "perf/reshard_bytes": float(reported.get("perf/reshard_bytes", 0.0)),
                "perf/reshard_peak_extra_bytes": float(
                    reported.get("perf/reshard_peak_extra_bytes", own)
                ),
            }
            if merges.checked:  # every merged weight held is its merge
                self.last_metrics["sync/verified"] = 1.0
                self.last_metrics["sync/merges_verified"] = float(merges.checked)
            with torch.no_grad():
                yield module
        finally:
            # Drop the generation weights: between calls only the training shard is held.
            generation_module.release(module)

    def _generation_module(self) -> torch.nn.Module:
        """The actor's architecture with no weights, built once (buffers real)."""
        if self._module is None:
            self._module = generation_module.build_on_meta(self.actor.hf_config, self.actor.device)
        return self._module
