"""Whether this process has been asked to stop (a SIGTERM / SIGINT the trainer handles).

The trainer's signal handler sets it and clears it when the run ends; code that
waits on something it does not control (a tool call) reads it to give up early,
so the step can finish and write its checkpoint within ``trainer.stop_grace_s``.
A plain flag, no lock: it is set inside a signal handler.
"""

from __future__ import annotations

_STATE = {"stopping": False}


def request_stop() -> None:
    """Ask waits that honour it to end now (called from a signal handler)."""
    _STATE["stopping"] = True


def clear_stop() -> None:
    """The stop was handled (the run ended): later runs in this process start clean."""
    _STATE["stopping"] = False


def stop_requested() -> bool:
    """Whether a stop was requested and not yet cleared."""
    return _STATE["stopping"]
