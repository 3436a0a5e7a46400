"""Validation: n samples per held-out prompt, scored, reduced to mean@n, pass@k and maj@k.

The core schedules validations (``trainer.val_every``, ``trainer.val_before_train``,
``trainer.keep_best``) and asks ``hfsdk_validate``; this plugin answers it.
Modules: :mod:`.validation` (the metrics and samples), :mod:`.pass_at_k` (the estimators).
"""
