"""The standard rollout corrections (``tis``, ``mis``, ``icepop``, ``geo_rs``, ``k3_rs``,
``trust_region``, ``dsv32_mask``), registered into hfsdk's ``rollout_corrections`` registry.

A run selects them with ``rollout_correction.preset`` / ``rollout_correction.apply``;
the core composes them (``hfsdk.combine_corrections``) and the actor's loss applies
them. See ``docs/async.md``, "Rollout corrections".
"""
