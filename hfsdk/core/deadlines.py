"""Deadlines that interrupt a hung call in the thread that made it, and say where it hung.

``with deadline(60, "reward function 'f' ..."):`` runs the block; if it is
still running after 60 s, the process's watchdog thread logs the block's
Python stack and raises :class:`DeadlineExceeded` inside it. In the main thread the exception
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
import heapq
import itertools
import logging
import os
import signal
import sys
import threading
import time
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

    __slots__ = ("active", "base", "exc_type", "fired", "ident", "log_stack", "main", "message")

    def __init__(
        self, ident: int, message: str, base: type[BaseException], main: bool, log_stack: bool
    ) -> None:
        self.ident = ident
        self.message = message
        self.base = base
        self.main = main
        self.log_stack = log_stack
        self.exc_type: type[BaseException] = base
        self.active = True
        self.fired = False

    def cancel(self) -> None:
        """Disarm: a late expiry, or a signal still on its way, then does nothing."""
        with _LOCK:
            pending = self.active and self.fired
            self.active = False
            _WATCHDOG.forget()
            if pending and not self.main:
                _set_async_exc(self.ident, None)  # clear an exception not yet raised


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


def _fire(armed: Armed) -> None:
    """Deliver ``armed``'s exception to its thread (by signal to the main thread); under _LOCK."""
    armed.fired = True
    # A class of its own, made only now: an asynchronous exception is given as a class.
    armed.exc_type = type(armed.base.__name__, (armed.base,), {"detail": armed.message})
    if armed.log_stack:
        stack = thread_stack(armed.ident).rstrip()
        logger.warning("%s; interrupting it, its stack:\n%s", armed.message, stack)
    if armed.main:
        _FIRED_IN_MAIN.append(armed)
        signal.pthread_kill(armed.ident, INTERRUPT_SIGNAL)
    else:
        _set_async_exc(armed.ident, armed.exc_type)


class _Watchdog:
    """One daemon thread per process that fires expired deadlines (arming costs microseconds)."""

    def __init__(self) -> None:
        self._wake = threading.Condition(_LOCK)
        self._heap: list[tuple[float, int, Armed]] = []
        self._count = itertools.count()
        self._active = 0
        self._pid = -1

    def add(self, armed: Armed, seconds: float) -> None:
        """Fire ``armed`` after ``seconds`` (inf: never) unless cancelled first; under _LOCK."""
        if self._pid != os.getpid():  # first use, or a forked child: the thread is not here
            self._pid = os.getpid()
            self._heap.clear()
            self._active = 0
            threading.Thread(target=self._run, name="hfsdk-deadlines", daemon=True).start()
        entry = (time.monotonic() + seconds, next(self._count), armed)
        heapq.heappush(self._heap, entry)
        self._active += 1
        if self._heap[0] is entry:
            self._wake.notify()

    def forget(self) -> None:
        """One armed deadline was cancelled; drop cancelled entries when they pile up."""
        self._active = max(0, self._active - 1)
        if len(self._heap) > 64 and len(self._heap) > 4 * self._active:
            self._heap = [e for e in self._heap if e[2].active and not e[2].fired]
            heapq.heapify(self._heap)

    def _run(self) -> None:
        with self._wake:
            while True:
                if not self._heap:
                    self._wake.wait()
                    continue
                when, _, armed = self._heap[0]
                if not armed.active or armed.fired:
                    heapq.heappop(self._heap)
                    continue
                delay = when - time.monotonic()
                if delay > 0:  # (a wait past TIMEOUT_MAX raises OverflowError, ending this thread)
                    self._wake.wait(min(delay, threading.TIMEOUT_MAX))
                    continue
                heapq.heappop(self._heap)
                self._active = max(0, self._active - 1)
                _fire(armed)


_WATCHDOG = _Watchdog()


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
    main = threading.current_thread() is threading.main_thread() and _install_handler()
    armed = Armed(threading.get_ident(), message, base, main, log_stack)
    with _LOCK:
        _WATCHDOG.add(armed, seconds)
    return armed


@contextmanager
def deadline(seconds: float | None, message: str, *, log_stack: bool = True) -> Iterator[None]:
    """Run the block; after ``seconds`` raise :class:`DeadlineExceeded` (``message``) in it.

    ``None``, nan or a non-positive value: no deadline (inf: one that never fires).
    With ``log_stack`` the block's stack at expiry is logged as a warning first.
    """
    if seconds is None or not seconds > 0:  # nan fails every comparison
        yield
        return
    armed = arm(seconds, message, log_stack=log_stack)
    try:
        yield
    finally:
        armed.cancel()
