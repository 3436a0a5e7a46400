"""Hook specifications the rollout-corrections plugin adds (through ``hfsdk_addhooks``)."""

from __future__ import annotations

import pluggy

from hfsdk import Register

hookspec = pluggy.HookspecMarker("hfsdk")


@hookspec
def hfsdk_register_rollout_corrections(register: Register) -> None:
    """Register rollout corrections: ``register(name, fn, config_cls=...)``.

    ``fn`` takes keyword tensors ``old_log_prob``, ``rollout_log_prob``,
    ``log_prob`` (the trained policy, detached), ``advantages``, ``response_mask``
    (all (B, T)) and ``config``; it returns a ``CorrectionResult`` (detached
    non-negative ``weights``, a boolean ``keep`` mask, ``metrics``). The contract,
    the ``rollout_correction`` section that selects them (``preset`` / ``apply``) and
    the actor's application are this plugin's; it fills the registry kind
    ``rollout_corrections`` (``hfsdk list rollout-corrections``).
    """
