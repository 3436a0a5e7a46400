"""Preemption-safe stops: SIGTERM / SIGINT finish the step, checkpoint, and exit 143 / 130.

Schedulers stop jobs with SIGTERM, a grace period, then SIGKILL (SLURM,
Kubernetes, spot instances); a terminal sends SIGINT on Ctrl-C. While
:class:`StopSignals` is installed, the first such signal only asks the run to
stop: the trainer finishes the current step, writes a checkpoint and raises
:class:`RunStopped`. If the step and its checkpoint are not done within
``trainer.stop_grace_s``, the step is abandoned (:class:`StopNow` is raised
where the controller is, the workers are torn down, the newest complete
checkpoint stands). A second signal abandons at once. Checkpoints are
published atomically, so neither way leaves a half-written one.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from typing import Any

from hfsdk.core.deadlines import Armed, arm
from hfsdk.core.stop_requests import clear_stop, request_stop

logger = logging.getLogger(__name__)

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopNow(BaseException):
    """Raised where the controller is when a stop cannot wait for the step to finish."""

    detail = "stop requested"

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else self.detail


class RunStopped(Exception):
    """The run stopped on a signal; ``str()`` is the one line to print, ``exit_code`` 128+N."""

    def __init__(self, message: str, *, signum: int, step: int | None) -> None:
        super().__init__(message)
        self.signum = signum
        self.step = step
        self.exit_code = 128 + signum


def signal_name(signum: int) -> str:
    """``SIGTERM`` for 15."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class StopSignals:
    """SIGTERM / SIGINT handlers that turn the first signal into a request, the second into
    :class:`StopNow`; the grace period starts at the first."""

    def __init__(self, grace_s: float) -> None:
        self.grace_s = grace_s
        self.signum: int | None = None
        self.abandoned = False
        self.step = 0
        """The step the trainer is on (for messages)."""
        self._previous: dict[int, Any] = {}
        self._grace: Armed | None = None

    @property
    def requested(self) -> bool:
        """Whether a stop signal arrived."""
        return self.signum is not None

    def install(self) -> bool:
        """Install (again, e.g. after a library replaced them) the handlers; main thread only."""
        if threading.current_thread() is not threading.main_thread():
            return False
        for signum in STOP_SIGNALS:
            previous = signal.signal(signum, self._handle)
            if previous != self._handle:
                self._previous.setdefault(signum, previous)
        return True

    def uninstall(self) -> None:
        """Put the previous handlers back and disarm the grace period."""
        self.disarm()
        clear_stop()
        for signum, previous in self._previous.items():
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
        self._previous.clear()

    def _handle(self, signum: int, frame: Any) -> None:
        name = signal_name(signum)
        if self.abandoned:  # already stopping at once: let the tear-down finish
            logger.warning("%s received again: already stopping", name)
            return
        if self.signum is not None:
            self.abandoned = True
            raise StopNow(f"a second {name}")
        self.signum = signum
        request_stop()  # waits that honour it (tool calls) end now, so the step can finish
        doing = f"finishing step {self.step} and writing a checkpoint" if self.step else ""
        logger.warning(
            "%s received: %s (at most %g s, trainer.stop_grace_s); send it again to stop at once",
            name,
            doing or "stopping before the next step starts, with nothing new to save",
            self.grace_s,
        )
        if self.grace_s > 0:
            message = f"not done within trainer.stop_grace_s={self.grace_s:g} s"
            self._grace = arm(self.grace_s, message, base=StopNow, log_stack=False)

    def disarm(self) -> None:
        """The stop's work is done (checkpoint written): the grace no longer applies."""
        if self._grace is not None:
            self._grace.cancel()
            self._grace = None

    def on_abandon(self) -> None:
        """Record that a :class:`StopNow` ended the step (the grace or a second signal)."""
        self.abandoned = True
        self.disarm()
