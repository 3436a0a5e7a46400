"""Shared RL maths that no single algorithm owns.

- :mod:`~hfsdk.core.maths.masked`: masked sums, means, variances, whitening and shape checks.
- :mod:`~hfsdk.core.maths.aggregation`: loss aggregation modes from global counts.
- :mod:`~hfsdk.core.maths.kl`: KL by a registered estimator, KL controllers, KL as reward
  penalty (KL as a loss term and the entropy bonus are the backends' shared package's).

The standard policy losses (``ppo_clip``, ``reinforce``), KL estimators (``k1`` ... ``k3``)
and the rollout corrections (their contract and composition too) are default plugins'
(``hfsdk-plugin-policy-losses``, ``hfsdk-plugin-rollout-corrections``).

Algorithm-specific maths (GAE, PPO clipping, group advantages, ...) lives in
the plugin that owns it and is registered by name.
"""
