"""Generation pipelines: ``trainer.pipeline: one_step_off`` and ``async``, and the rollout
pool's weight syncs (``placement.pools.rollout``).

The trainer asks ``hfsdk_build_generation_pipeline`` for the object that stands between it
and its prompt stream; this plugin answers with a :class:`~.pipeline.GenerationPipeline`
and checks the rollout pool's settings before a run starts. See docs/async.md.

Modules: :mod:`.pipeline` (loading the plugin imports it only when a hook runs).
"""
