"""Running model-written Python code without letting it touch the run.

One implementation serves every caller that executes generated code (the
``code_tests`` reward, code-execution tools): :func:`run_python` runs a
snippet in a separate process and reports what happened as a
:class:`SandboxResult`; :func:`run_many` runs several with bounded concurrency.
See ``docs/rewards.md#sandboxed-code`` for the layers of protection and what
each one stops.
"""

from hfsdk.core.sandbox.limits import SandboxLimits
from hfsdk.core.sandbox.runner import SandboxResult, run_many, run_python

__all__ = ["SandboxLimits", "SandboxResult", "run_many", "run_python"]
