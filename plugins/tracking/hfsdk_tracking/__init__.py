"""Metric sinks ``tensorboard`` and ``wandb`` for ``trainer.loggers`` (hfsdk-plugin-tracking).

The core keeps ``metrics.jsonl`` and the console bar; this plugin registers the two
sinks that need a third-party package (imported only when a run lists them) through
``hfsdk_register_trackers``, and the ``wandb`` config section.
"""
