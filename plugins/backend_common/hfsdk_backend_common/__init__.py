"""What hfsdk's backends share, in one home every backend plugin depends on.

A training or rollout backend plugin imports ``hfsdk`` and this package, never
another backend plugin. Modules (each imports torch/transformers itself, so
importing this package costs nothing):

- training: :mod:`.objectives` (actor/critic losses over registry entries),
  :mod:`.token_ops` (response slices, log-probs, position ids),
  :mod:`.lr_schedule`, :mod:`.optim_config` (``<role>.optim``),
  :mod:`.engine_support` (batch keys, devices, padding rows, metric
  accumulation, role kind -> engine kind), :mod:`.tokenizers`;
- rollout: :mod:`.rollout_config` (the ``rollout`` section of HF-weight
  rollouts), :mod:`.generation` (EOS ids, response masks), :mod:`.rollout`
  (the ``hf`` rollout backend, written against ``hfsdk``'s rollout contract
  for any training backend's actor, its weightless generation module, and the
  every-rank agreement a reloading rollout uses); :mod:`.plugin` registers it;
- model formats and the 3D-HybridEngine's execution, :mod:`.hybrid`:
  :mod:`.hybrid.llama_format` (megatron-core tensor names and HF mapping),
  :mod:`.hybrid.decoder` (the KV-cache tensor-parallel decoder),
  :mod:`.hybrid.support` (which models it decodes),
  :mod:`.hybrid.reshard` (the micro-DP train -> generate transition),
  :mod:`.hybrid.groups`, :mod:`.hybrid.stages`;
- verified weight syncs, :mod:`.weight_check` (its names are importable from
  this package: ``from hfsdk_backend_common import fingerprint``): exact
  fingerprints and bit sums of what a sender sent and a receiver holds,
  :class:`WeightSyncMismatch`, and the probes that check a derived weight (a
  LoRA merge) without redoing it;
- :mod:`.testing`: synthetic weights and a local multi-process launcher for
  tests and benchmarks.

The layout maths the planner uses (layouts, byte formulas, parameter split
specs) stays in ``hfsdk_backend_common.hybrid``.
"""

from hfsdk_backend_common.weight_check import (
    Fingerprint,
    LowRankProbe,
    ProbeCheck,
    WeightSyncMismatch,
    bit_sum,
    check_probe,
    compare_manifest,
    fingerprint,
    low_rank_probe,
    manifest,
    probe_input,
    require_loaded,
)

__all__ = [
    "Fingerprint",
    "LowRankProbe",
    "ProbeCheck",
    "WeightSyncMismatch",
    "bit_sum",
    "check_probe",
    "compare_manifest",
    "fingerprint",
    "low_rank_probe",
    "manifest",
    "probe_input",
    "require_loaded",
]
