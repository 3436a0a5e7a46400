"""The standard reward functions (``hfsdk-plugin-rewards``).

``exact_match``, ``format_check`` and ``length_penalty`` (:mod:`.builtins`),
``math_verify`` (:mod:`.math_verify_reward`), ``code_tests`` (:mod:`.code_tests`,
run in the sandbox of ``hfsdk-plugin-sandbox``) and ``remote`` (:mod:`.remote`).
They follow the calling convention of :mod:`hfsdk.core.rewards`, which calls,
composes and loads any reward function; see ``docs/rewards.md``.
"""
