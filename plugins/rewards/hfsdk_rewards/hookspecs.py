"""Hook specifications the rewards plugin adds (through ``hfsdk_addhooks``)."""

from __future__ import annotations

import pluggy

from hfsdk import Register

hookspec = pluggy.HookspecMarker("hfsdk")


@hookspec
def hfsdk_register_reward_styles(register: Register) -> None:
    """Register reward call styles: ``register(name, hfsdk_rewards.RewardCallStyle(adapt=...))``.

    A style calls reward functions written for another framework's convention
    (e.g. verl's per-sample ``compute_score``) from hfsdk's
    ``fn(prompts, responses, **columns)``: ``adapt(label, fn, settings)`` wraps
    the function, ``recognises(fn)`` picks the style from a signature when a
    config gives no ``style:``, and ``check(call, columns)`` explains, before a
    run starts, why a function cannot be called that way. A reward section
    selects one with ``functions: [{name: ..., style: NAME}]``; the table of
    styles is resolved once when the section is loaded. Fills the registry kind
    ``reward_styles`` (``hfsdk list reward-styles``).
    """
