"""Rollout corrections for tokens another policy sampled, and the rollout–training mismatch.

- :mod:`~hfsdk_rollout_corrections.contract`: what a correction returns
  (:class:`~hfsdk_rollout_corrections.contract.CorrectionResult`) and how a run's list
  composes (``combine_corrections``), which the backends' shared actor loss applies;
- :mod:`~hfsdk_rollout_corrections.corrections`: the standard ones (``tis``, ``mis``,
  ``icepop``, ``geo_rs``, ``k3_rs``, ``trust_region``, ``dsv32_mask``), registered into
  hfsdk's ``rollout_corrections`` registry;
- :mod:`~hfsdk_rollout_corrections.section`: the ``rollout_correction`` section
  (``preset`` / ``apply``, the older ``algorithm.is_correction``) and its resolution;
- :mod:`~hfsdk_rollout_corrections.mismatch`: the ``mismatch/*`` metrics, a step observer.

Submodules, not re-exports here: the plugin's entry point imports this package, and the
corrections import torch. See ``docs/async.md``, "Rollout corrections".
"""
