"""hfsdk's migration plugin: for users coming from verl, TRL or OpenRLHF.

- ``hfsdk config import --from verl|trl|openrlhf``: their configs and launch scripts
  as hfsdk run configs (:mod:`hfsdk_migration.importing`);
- reward functions written in their calling conventions, registered as reward call
  styles ``verl``, ``trl`` and ``openrlhf`` (:mod:`hfsdk_migration.reward_styles`);
- ``hfsdk data inspect``: what a run would make of a dataset, and what it would
  refuse, before starting one (:mod:`hfsdk_migration.inspection`).

See docs/migrating.md.
"""
