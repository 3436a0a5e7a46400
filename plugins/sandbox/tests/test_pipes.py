"""Reading a program's output: a byte cap, a deadline, and both streams at once."""

from __future__ import annotations

import os
import threading
import time

from hfsdk_sandbox.pipes import drain


def test_a_writer_that_never_closes_is_left_at_the_deadline() -> None:
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    os.write(out_w, b"partial")
    started = time.monotonic()
    got = drain(out_r, err_r, cap=1024, deadline=time.monotonic() + 0.5)
    assert got.timed_out and not got.over_cap and got.stdout == b"partial"
    assert 0.4 < time.monotonic() - started < 3
    os.close(out_w)
    os.close(err_w)


def test_more_than_the_cap_on_either_stream_stops_reading() -> None:
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()

    def flood() -> None:
        try:
            while True:
                os.write(err_w, b"e" * 4096)
        except OSError:  # the reader closed its end
            pass

    thread = threading.Thread(target=flood, daemon=True)
    thread.start()
    got = drain(out_r, err_r, cap=10_000, deadline=time.monotonic() + 10)
    assert got.over_cap and not got.timed_out
    assert len(got.stderr) == 10_000 and got.stdout == b""
    thread.join(timeout=5)
    os.close(out_w)
    os.close(err_w)


def test_both_streams_are_read_to_their_end() -> None:
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    os.write(out_w, b"out\n")
    os.write(err_w, b"err\n")
    os.close(out_w)
    os.close(err_w)
    got = drain(out_r, err_r, cap=1024, deadline=time.monotonic() + 5)
    assert (got.stdout, got.stderr, got.over_cap, got.timed_out) == (
        b"out\n",
        b"err\n",
        False,
        False,
    )
