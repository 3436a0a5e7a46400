"""Tool calls in a worker process that is killed at a call's deadline.

A thread cannot be stopped: a sync tool that loops forever, or an ``async def``
tool that blocks its event loop (``time.sleep`` inside a coroutine), used to hang
the rollout, and with it the step, the watchdog and the stop signals. So every
call of a tool set runs in a child process (:class:`ToolWorkers`), forked from
the caller, so it holds the very tools the caller loaded (a file's functions, a
closure, a verl class) without pickling them. Inside the child each call gets a
thread of its own (an ``async def`` tool its own event loop), so calls of one
turn still run concurrently.

When a call passes its deadline the caller gets a ``timeout`` at once and the
child is *retired*: new calls go to a fresh child, and the retired one is
killed (``SIGKILL``) as soon as the other calls it was running have returned or
passed their own deadlines. Once the run is asked to stop (SIGTERM / SIGINT,
:mod:`hfsdk.core.stop_requests`) waiting calls end at once as ``stopped``, so the
step finishes and writes its checkpoint within the grace. A child that dies (a
tool called ``os._exit``, a segfault) fails the calls it held as ``crashed``. The
child never outlives the caller: it leaves when its socket closes, and the caller
kills its children at exit. Each child leads a process group, killed whole: processes a
tool forked go with it (unless they left the group, ``setsid``).
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import gc
import inspect
import io
import itertools
import json
import numbers
import os
import pickle
import signal
import socket
import sys
import threading
import weakref
from collections.abc import Callable, Mapping
from multiprocessing.connection import Connection
from typing import Any

import attrs

from hfsdk import stop_requested

STOP_POLL_S = 0.1
"""How often a waiting call looks for a stop request (a signal handler sets it)."""


@attrs.frozen
class ToolResult:
    """What a tool returns to show the model images: ``images`` then ``content`` in the next turn.

    ``images``: PIL images or encoded image files (PNG, JPEG bytes). A tool may also return
    one PIL image alone. Only a rollout that generates from images can show them (the run
    stops with one line otherwise: ``docs/multimodal.md``, "Tools that return images").
    """

    content: str = ""
    images: tuple[Any, ...] = attrs.field(default=(), converter=tuple)


Outcome = tuple[str, "str | ToolResult"]
"""``(kind, output)``: ``ok`` with the text (a :class:`ToolResult` when it has images, the images
as PNG / encoded bytes), or an error kind (``tool_error``, ``exception``, ``bad_output``,
``timeout``, ``crashed``, ``stopped``, ``bad_arguments``) with its message."""


@attrs.frozen
class _Call:
    call_id: int
    name: str
    arguments: dict[str, Any]
    schema_json: str | None = None
    """The tool's parameter schema (JSON): the arguments are checked against it here, in the
    worker, so that a schema ``pattern`` that backtracks runs under the call's deadline."""


# Parent-side sockets of the live children: a child forked later closes them, so that a
# child sees its own socket close when the caller dies (not when every sibling does).
_PARENT_FDS: set[int] = set()
_LIVE: weakref.WeakSet[_Worker] = weakref.WeakSet()


def _kill_all() -> None:
    for worker in list(_LIVE):
        worker.kill()


atexit.register(_kill_all)


class ToolError(Exception):
    """Raised by a tool to give the model ``str(error)`` as an error output (counted as one)."""


def _plain_json(value: Any) -> Any:
    """``json.dumps``'s ``default``: NumPy / torch numbers and arrays as Python ones."""
    for method in ("tolist", "item"):
        if callable(getattr(value, method, None)):
            return getattr(value, method)()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _as_text(value: Any) -> str:
    """A tool's return value as the text the model reads (JSON for containers).

    Numbers of any kind (NumPy's ``int64``, ``float32``, ``Decimal``) are their ``str``; other
    objects with ``.item()`` (``numpy.bool_``, a 0-d array, a one-element tensor) are their
    Python value, and NumPy values inside containers are written as Python ones.
    """
    if isinstance(value, str):
        return str(value)  # a plain str: a subclass of the tool's may not pickle
    if value is None:
        return ""
    if isinstance(value, numbers.Number):
        return str(value)
    item = getattr(value, "item", None)
    if callable(item) and not isinstance(value, (Mapping, list, tuple)):
        try:
            plain = item()
        except Exception:  # an array of several values: written as JSON below
            plain = value
        if plain is None or isinstance(plain, (str, int, float, bool)):
            return _as_text(plain)
    return json.dumps(value, default=_plain_json)  # raises TypeError/ValueError for junk


class _BadImage(TypeError):
    """A tool's image that cannot be shown to the model (not an image, or bytes that do not
    decode): answered as the tool's error, its message kept."""


def _check_decodes(data: bytes, number: int) -> None:
    """Raise :class:`_BadImage` when ``data`` is no image file PIL can read.

    PIL is a vision dependency, not the agents plugin's: without it the bytes pass unchecked
    (no rollout could show them then either). Checked here so that a broken image is this
    call's error, not the rollout's failure mid-step.
    """
    try:
        from PIL import Image
    except ImportError:
        return
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.verify()
    except Exception as err:  # PIL raises several kinds (OSError, SyntaxError, ValueError)
        why = "not an image file" if isinstance(err, Image.UnidentifiedImageError) else _said(err)
        raise _BadImage(
            f"image {number} ({len(data)} bytes) does not decode ({why}); return a PIL image "
            "or PNG/JPEG bytes"
        ) from None


def _image_bytes(image: Any, number: int = 0) -> bytes:
    """An encoded image file of ``image`` (PNG for a PIL image; bytes pass as they are, once
    they decode)."""
    if isinstance(image, bytes):
        _check_decodes(image, number)
        return image
    if "PIL.Image" in sys.modules and isinstance(image, sys.modules["PIL.Image"].Image):
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
        return buffer.getvalue()
    raise _BadImage(f"an image must be a PIL image or encoded bytes, not {type(image).__name__}")


def _as_output(value: Any) -> str | ToolResult:
    """A tool's return value as what crosses to the caller: text, or a :class:`ToolResult`
    whose images are encoded bytes (pickled over the socket)."""
    if "PIL.Image" in sys.modules and isinstance(value, sys.modules["PIL.Image"].Image):
        value = ToolResult(images=(value,))
    if isinstance(value, ToolResult):
        images = tuple(_image_bytes(image, number) for number, image in enumerate(value.images))
        return ToolResult(content=_as_text(value.content), images=images)
    return _as_text(value)


def _run_one(fn: Callable[..., Any], call: _Call) -> Outcome:
    """Call ``fn`` in this (child) thread; an ``async def`` tool in an event loop of its own.

    The arguments are checked against the call's schema first (:func:`checked_arguments
    <hfsdk_agents.argument_checks.checked_arguments>`), here under the deadline.
    """
    arguments = call.arguments
    if call.schema_json is not None:
        from hfsdk_agents.argument_checks import checked_arguments

        try:
            arguments, problem = checked_arguments(call.schema_json, fn, arguments)
        except BaseException as err:  # jsonschema's own failure: an answer, not a hang
            problem = f"the arguments could not be checked ({type(err).__name__}: {_said(err)})"
        if problem is not None:
            return ("bad_arguments", f"{call.name}: {problem}")
    try:
        value = fn(**arguments)
        if inspect.isawaitable(value):
            value = asyncio.run(_awaited(value))
    except ToolError as err:
        return ("tool_error", _said(err))
    except BaseException as err:  # SystemExit too: a tool must not end its worker quietly
        return ("exception", f"{call.name} raised {type(err).__name__}: {_said(err)}")
    try:
        return ("ok", _as_output(value))
    except _BadImage as err:  # its message says what an image must be: keep it
        return ("bad_output", f"{call.name} returned an image hfsdk cannot use: {err}")
    except BaseException:  # not JSON (nor nested too deep for it), or a failing __str__
        return ("bad_output", f"{call.name} returned a {type(value).__name__}, not text or JSON")


def _said(err: BaseException) -> str:
    """``str(err)``, or a stand-in when the exception's own ``__str__`` raises (the worker
    thread must answer every call, or the caller waits out the whole deadline)."""
    try:
        return str(err)
    except BaseException:
        return f"(its message could not be shown: str() of the {type(err).__name__} raised)"


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def _serve(conn: Connection, fns: Mapping[str, Callable[..., Any]]) -> None:
    """The child's main loop: a thread per call, results back over ``conn``; leave at EOF."""
    lock = threading.Lock()

    def work(call: _Call) -> None:
        outcome = _run_one(fns[call.name], call)
        with lock, contextlib.suppress(OSError, ValueError):
            try:
                conn.send((call.call_id, *outcome))
            except (pickle.PicklingError, TypeError, AttributeError, RecursionError):
                # Unanswered, the call would wait out its whole deadline as a "timeout".
                said = f"{call.name} returned what cannot be sent back (not text or JSON)"
                conn.send((call.call_id, "bad_output", said))

    while True:
        try:
            call = conn.recv()
        except (EOFError, OSError):
            return
        threading.Thread(target=work, args=(call,), daemon=True).start()


def _child_main(conn: Connection, fns: Mapping[str, Callable[..., Any]]) -> None:
    """Runs in the forked child; never returns into the caller's code."""
    code = 0
    try:
        for fd in list(_PARENT_FDS):
            with contextlib.suppress(OSError):
                os.close(fd)
        # The caller's objects stay as they are: the collector never walks them (no copies).
        gc.freeze()
        # A group of its own, so that killing it kills what a tool forked too (a grandchild
        # would otherwise live on, holding this socket open); the caller decides what stops.
        with contextlib.suppress(OSError):
            os.setpgid(0, 0)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for signum in (signal.SIGTERM, signal.SIGUSR2, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        with contextlib.suppress(ValueError, OSError):
            signal.set_wakeup_fd(-1)
        _serve(conn, fns)
    except BaseException:
        code = 1
    finally:
        os._exit(code)


class _Worker:
    """One child process and the calls it is running."""

    def __init__(self, fns: Mapping[str, Callable[..., Any]]) -> None:
        parent_sock, child_sock = socket.socketpair()
        pid = os.fork()
        if pid == 0:  # the child
            parent_sock.close()
            _child_main(Connection(child_sock.detach()), fns)
        child_sock.close()
        with contextlib.suppress(OSError):  # as the child does: whichever runs first
            os.setpgid(pid, pid)
        self.pid = pid
        self.conn = Connection(parent_sock.detach())
        _PARENT_FDS.add(self.conn.fileno())
        self.pending: dict[int, concurrent.futures.Future[Outcome]] = {}
        self.retired = False
        self.dead = False
        self.exit_status: int | None = None
        self._lock = threading.Lock()
        self._reader = threading.Thread(
            target=self._read, name=f"hfsdk-tool-worker-{pid}", daemon=True
        )
        self._reader.start()
        _LIVE.add(self)

    def submit(self, call: _Call) -> concurrent.futures.Future[Outcome]:
        """Send ``call``; its future settles with the outcome (or ``crashed``)."""
        future: concurrent.futures.Future[Outcome] = concurrent.futures.Future()
        with self._lock:
            if self.dead:
                future.set_result(("crashed", f"{call.name}: the tool worker process is gone"))
                return future
            self.pending[call.call_id] = future
            try:
                self.conn.send(call)
            except (pickle.PicklingError, TypeError, AttributeError, RecursionError):
                # Arguments pickle cannot write (nested past the recursion limit: a plugin's
                # parser may let them through) are the model's fault; the socket saw nothing,
                # since the call is pickled whole before a byte is sent.
                self.pending.pop(call.call_id, None)
                said = f"{call.name}: the arguments cannot be sent to the tool worker (nested "
                future.set_result(("bad_arguments", said + "too deeply or not JSON)"))
            except (OSError, ValueError):
                self.pending.pop(call.call_id, None)
                future.set_result(("crashed", f"{call.name}: the tool worker process is gone"))
        return future

    def abandon(self, call_id: int) -> None:
        """The caller stopped waiting for ``call_id``: retire this child, kill it once idle."""
        with self._lock:
            self.pending.pop(call_id, None)
            self.retired = True
            idle = not self.pending
        if idle:
            self.kill()

    def _read(self) -> None:
        while True:
            try:
                call_id, kind, text = self.conn.recv()
            except (EOFError, OSError, ValueError):
                break
            with self._lock:
                future = self.pending.pop(call_id, None)
                idle = self.retired and not self.pending
            if idle:  # before the result: its caller never sees a retired, idle child alive
                self.kill()
            if future is not None:
                future.set_result((kind, text))
        with self._lock:
            _PARENT_FDS.discard(self.conn.fileno())
            self.conn.close()
        self._reap()
        with self._lock:
            self.dead = True
            orphans, self.pending = list(self.pending.values()), {}
        status = self.exit_status
        reason = f"exit status {status}" if status is not None else "it was killed"
        for future in orphans:
            future.set_result(("crashed", f"the tool worker process died ({reason})"))

    def kill(self) -> None:
        """SIGKILL the child and its process group (idempotent); the reader thread then ends."""
        with self._lock:
            if self.dead:
                return
            self.dead = True
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        self._reap()  # its end of the socket is closed now: the reader thread reads EOF
        _LIVE.discard(self)

    def check_exit(self) -> None:
        """End the calls of a child that has exited though a process it forked (``setsid``:
        out of its group) still holds the socket: the reader's EOF would never come, and
        the calls would wait out their deadlines as ``timeout``s."""
        if self.exit_status is not None:
            return
        with contextlib.suppress(ChildProcessError):
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid == 0:
                return
            self.exit_status = os.waitstatus_to_exitcode(status)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)  # what stayed in its group
        with self._lock, contextlib.suppress(OSError):  # the reader reads EOF, fails the calls
            if not self.conn.closed:  # (under the lock: the reader closes it under it too)
                with socket.socket(fileno=os.dup(self.conn.fileno())) as sock:
                    sock.shutdown(socket.SHUT_RDWR)

    def _reap(self) -> None:
        if self.exit_status is not None:
            return
        with contextlib.suppress(ChildProcessError):
            _, status = os.waitpid(self.pid, 0)
            self.exit_status = os.waitstatus_to_exitcode(status)

    def join(self, timeout: float | None = None) -> None:
        """Wait for the reader thread (ends once the child is gone)."""
        if self._reader is not threading.current_thread():
            self._reader.join(timeout)


class ToolWorkers:
    """The worker process of one tool set: :meth:`run` calls a tool there with a deadline.

    ``fns`` maps tool names to their functions. The child is forked on the first
    call (and again after a retirement); :meth:`close` kills it.
    """

    def __init__(self, fns: Mapping[str, Callable[..., Any]]) -> None:
        self.fns = dict(fns)
        self._workers: list[_Worker] = []  # the last one takes new calls unless retired
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self.started = 0
        """Children forked so far (one, plus one per retirement or crash)."""
        weakref.finalize(self, ToolWorkers._kill_workers, self._workers)

    @staticmethod
    def _kill_workers(workers: list[_Worker]) -> None:
        for worker in list(workers):
            worker.kill()

    def _active(self) -> _Worker:
        with self._lock:
            self._workers[:] = [w for w in self._workers if not w.dead]
            if not self._workers or self._workers[-1].retired:
                self._workers.append(_Worker(self.fns))
                self.started += 1
            return self._workers[-1]

    async def run(
        self,
        name: str,
        arguments: Mapping[str, Any],
        timeout_s: float,
        *,
        schema_json: str | None = None,
    ) -> Outcome:
        """``name(**arguments)`` in the worker; ``("timeout", ...)`` after ``timeout_s``.

        ``schema_json``: the tool's parameter schema; the worker checks the arguments against
        it (``("bad_arguments", ...)``) within the same deadline.
        """
        if stop_requested():
            return ("stopped", f"{name} was not called: the run is stopping")
        worker = self._active()
        call = _Call(next(self._ids), name, dict(arguments), schema_json)
        waiting = asyncio.wrap_future(worker.submit(call))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        try:
            while not waiting.done():
                left = deadline - loop.time()
                if left <= 0:
                    worker.abandon(call.call_id)
                    return ("timeout", f"{name} did not return within {timeout_s:g} s")
                if stop_requested():  # let the step finish and checkpoint within the grace
                    worker.abandon(call.call_id)
                    return ("stopped", f"{name} was cut short: the run is stopping")
                await asyncio.wait({waiting}, timeout=min(left, STOP_POLL_S))
                if not waiting.done():
                    worker.check_exit()
            return waiting.result()
        except asyncio.CancelledError:
            worker.abandon(call.call_id)
            raise

    def workers(self) -> list[_Worker]:
        """The live children (the active one and retired ones still finishing calls)."""
        with self._lock:
            return [w for w in self._workers if not w.dead]

    def close(self) -> None:
        """Kill every child and wait for their reader threads."""
        with self._lock:
            found, self._workers[:] = list(self._workers), []
        for worker in found:
            worker.kill()
            worker.join(5.0)
