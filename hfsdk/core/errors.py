"""Errors hfsdk raises for bad input.

Every message names what was wrong, what was expected and what to do; the CLI
prints it on one line and exits with status 2 (``--debug`` shows the traceback).
"""

from __future__ import annotations


class HfsdkError(ValueError):
    """A user-facing error: bad config, unknown name, infeasible request, bad data."""


class UnknownNameError(HfsdkError, KeyError):
    """A name that is not in a registry (the message lists the available names)."""

    def __str__(self) -> str:
        # KeyError would quote the message; keep it readable.
        return str(self.args[0]) if self.args else ""


class DuplicateNameError(HfsdkError):
    """Two plugins registered the same name in one registry."""


class ConfigError(HfsdkError):
    """A run config that cannot be loaded, structured or validated."""
