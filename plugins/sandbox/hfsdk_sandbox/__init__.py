"""Running model-written Python code without letting it touch the run.

One implementation serves every caller that executes generated code (the
``code_tests`` reward, code-execution tools): :func:`run_python` runs a
snippet in a separate process and reports what happened as a
:class:`SandboxResult`; :func:`run_many` runs several with bounded concurrency.
See ``docs/agents.md#sandbox-layers`` for the layers of protection, what each
one guarantees and what it does not.
"""

from hfsdk_sandbox.limits import SandboxLimits
from hfsdk_sandbox.runner import (
    ISOLATIONS,
    Isolation,
    SandboxResult,
    isolation,
    run_many,
    run_python,
    set_isolation,
    unavailable_line,
)

__all__ = [
    "ISOLATIONS",
    "Isolation",
    "SandboxLimits",
    "SandboxResult",
    "isolation",
    "run_many",
    "run_python",
    "set_isolation",
    "unavailable_line",
]
