"""Rollout backends written against the rollout contract only (:mod:`hfsdk.core.rollout_contract`).

:mod:`.hf_rollout` is the ``hf`` backend; :mod:`.generation_module` the
weightless generation module it fills from ``ActorSource.hf_weights``;
:mod:`.agreement` makes a per-rank step fail on every rank at once.
"""
