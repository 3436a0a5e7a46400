"""The reward runtime and the standard reward functions (``hfsdk-plugin-rewards``).

The runtime: the calling convention ``fn(prompts, responses, **columns)`` and its
checks (:mod:`.calling`, :mod:`.signatures`), loading a function by registered name,
``module:function`` or ``file.py:function`` (:mod:`.loading`), the weighted sum of a
signal section (:mod:`.composition`), reward call styles of other frameworks
(:mod:`.call_styles`, the ``hfsdk_register_reward_styles`` hook of :mod:`.hookspecs`),
the run's scorer behind the core's ``hfsdk_build_reward_scorer`` (:mod:`.scorer`) and
``hfsdk reward score`` (:mod:`.command`).

The functions: ``exact_match``, ``format_check`` and ``length_penalty``
(:mod:`.builtins`), ``math_verify`` (:mod:`.math_verify_reward`), ``code_tests``
(:mod:`.code_tests`, run in the sandbox of ``hfsdk-plugin-sandbox``) and ``remote``
(:mod:`.remote`). See ``docs/rewards.md``.
"""

from hfsdk_rewards.call_styles import HFSDK_STYLE, RewardCallStyle, RewardStyles
from hfsdk_rewards.composition import compute_rewards, load_reward_functions
from hfsdk_rewards.errors import RewardFunctionError
from hfsdk_rewards.signatures import signature_problem

__all__ = [
    "HFSDK_STYLE",
    "RewardCallStyle",
    "RewardFunctionError",
    "RewardStyles",
    "compute_rewards",
    "load_reward_functions",
    "signature_problem",
]
