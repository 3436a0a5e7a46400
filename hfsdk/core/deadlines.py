"""Deadlines that interrupt a hung call in the thread that made it, and say where it hung.

``with deadline(60, "reward function 'f' ..."):`` runs the block; if it is
still running after 60 s, a timer thread logs the block's Python stack and
raises :class:`DeadlineExceeded` inside it. In the main thread the exception
is delivered by a signal (``SIGUSR2`` sent to that thread), which also wakes a
blocking ``time.sleep`` or socket wait; in another thread it is set as an
asynchronous exception, which lands at the next Python bytecode. Code stuck
inside a C call that never returns (a collective with no timeout) gets the
stack logged but keeps the thread: the caller's own backstop (a Ray call's
controller-side wait, the stop grace) handles that.

The exception is a ``BaseException`` so that ``except Exception`` in the hung
code does not swallow it.
"""

from __future__ import annotations

import ctypes
import logging
import signal
import sys
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

logger = logging.getLogger(__name__)

INTERRUPT_SIGNAL = signal.SIGUSR2
"""The signal that carries an expired deadline to the main thread."""


class DeadlineExceeded(BaseException):
    """Raised inside a block that ran past its :func:`deadline` (``str()`` is the message)."""

    detail = "deadline exceeded"

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else self.detail


class Armed:
    """A pending deadline on one thread (see :func:`arm`); :meth:`cancel` disarms it."""

    __slots__ = ("active", "exc_type", "fired", "ident", "main", "message", "timer")

    def __init__(self, ident: int, message: str, base: type[BaseException], main: bool) -> None:
        self.ident = ident
        self.message = message
        self.main = main
        # A class of its own: an asynchronous exception can only be given as a class.
        self.exc_type = type(base.__name__, (base,), {"detail": message})
        self.active = True
        self.fired = False
        self.timer: threading.Timer | None = None

    def cancel(self) -> None:
        """Disarm: a late timer, or a signal still on its way, then does nothing."""
        with _LOCK:
            pending = self.active and self.fired
            self.active = False
            if pending and not self.main:
                _set_async_exc(self.ident, None)  # clear an exception not yet raised
        if self.timer is not None:
            self.timer.cancel()


_LOCK = threading.Lock()
_FIRED_IN_MAIN: list[Armed] = []
_PREVIOUS_HANDLER: Any = None
_HANDLER_INSTALLED = False


def _handler(signum: int, frame: Any) -> None:
    # Runs in the main thread between bytecodes: no lock (the main thread may hold it).
    while _FIRED_IN_MAIN:
        armed = _FIRED_IN_MAIN.pop(0)
        if armed.active:
            armed.active = False
            raise armed.exc_type(armed.message)
    if callable(_PREVIOUS_HANDLER):
        _PREVIOUS_HANDLER(signum, frame)


def _install_handler() -> bool:
    """Install the delivering handler once (kept: a late signal must never meet SIG_DFL)."""
    global _HANDLER_INSTALLED, _PREVIOUS_HANDLER
    if _HANDLER_INSTALLED:
        return signal.getsignal(INTERRUPT_SIGNAL) is _handler
    try:
        _PREVIOUS_HANDLER = signal.signal(INTERRUPT_SIGNAL, _handler)
    except (ValueError, OSError):  # not the main thread of the main interpreter
        return False
    _HANDLER_INSTALLED = True
    return True


def thread_stack(ident: int) -> str:
    """The current Python stack of thread ``ident`` (empty if it is gone)."""
    frame = sys._current_frames().get(ident)
    return "".join(traceback.format_stack(frame)) if frame is not None else ""


def _set_async_exc(ident: int, exc_type: type[BaseException] | None) -> None:
    value = ctypes.py_object(exc_type) if exc_type is not None else ctypes.c_void_p(0)
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), value)


def interrupt(armed: Armed) -> None:
    """Deliver ``armed``'s exception to its thread (by signal in the main thread)."""
    if armed.main:
        _FIRED_IN_MAIN.append(armed)
        signal.pthread_kill(armed.ident, INTERRUPT_SIGNAL)
    else:
        _set_async_exc(armed.ident, armed.exc_type)


def arm(
    seconds: float,
    message: str,
    *,
    base: type[BaseException] = DeadlineExceeded,
    log_stack: bool = True,
) -> Armed:
    """After ``seconds``, raise a ``base`` (``str()``: ``message``) in the calling thread.

    With ``log_stack`` the thread's stack at that moment is logged as a warning
    first. Call :meth:`Armed.cancel` once the guarded work is over.
    """
    ident = threading.get_ident()
    main = threading.current_thread() is threading.main_thread() and _install_handler()
    armed = Armed(ident, message, base, main)

    def fire() -> None:
        with _LOCK:
            if not armed.active:
                return
            armed.fired = True
            if log_stack:
                stack = thread_stack(ident).rstrip()
                logger.warning("%s; interrupting it, its stack:\n%s", message, stack)
            interrupt(armed)

    armed.timer = threading.Timer(seconds, fire)
    armed.timer.daemon = True
    armed.timer.name = "hfsdk-deadline"
    armed.timer.start()
    return armed


@contextmanager
def deadline(seconds: float | None, message: str, *, log_stack: bool = True) -> Iterator[None]:
    """Run the block; after ``seconds`` raise :class:`DeadlineExceeded` (``message``) in it.

    ``None`` or a non-positive value: no deadline. With ``log_stack`` the
    block's stack at expiry is logged as a warning before it is interrupted.
    """
    if seconds is None or seconds <= 0:
        yield
        return
    armed = arm(seconds, message, log_stack=log_stack)
    try:
        yield
    finally:
        armed.cancel()
