"""The child process of ``math_verify``: parses and verifies one sample per request.

Run as a script (``runpy.run_path``), never imported by the package: it needs only
the standard library and ``math-verify``, so it starts without hfsdk's imports.
The parent (:mod:`hfsdk_rewards.math_verify_reward`) writes one JSON request a line
on stdin and reads one JSON reply a line from the protocol descriptor; it kills
this process when a sample runs past its time limit, since sympy can compute
inside C for ever, where no Python-level timeout (signal or asynchronous
exception) can interrupt it.

Request: ``{"gold": str, "answer": str, "float_rounding": int, "strict": bool,
"limit_s": float}``. Reply: ``{"gold_ok": bool, "found": bool, "correct": bool}``,
or ``{"error": str}`` when math-verify raised. At start it writes ``{"ready": true}``,
or ``{"error": str}`` and exits when math-verify cannot be imported.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import sys
from typing import Any, TextIO


class _NoTimeoutNotice(logging.Filter):
    """Drops math-verify's notice that its timeout is off: the parent's kill is the timeout."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Timeout is disabled" not in record.getMessage()


def _protocol_channel() -> TextIO:
    """A private copy of stdout for replies; fd 1 then points at stderr, so anything that
    sympy or math-verify prints cannot corrupt the protocol."""
    channel = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    return channel


def _limit_cpu(limit_s: float) -> None:
    """A kernel backstop for this sample: SIGXCPU ends the process once it has used
    ``limit_s`` (+2 s) more CPU, even if the parent died and cannot kill it."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = int(usage.ru_utime + usage.ru_stime + limit_s) + 2
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def _score(request: dict[str, Any]) -> dict[str, bool]:
    """Parse the reference and the response and compare them (math-verify's own
    ``SIGALRM`` timeouts off: the parent bounds the whole sample)."""
    from math_verify import parse, verify

    gold = parse(request["gold"], parsing_timeout=None)  # type: ignore[arg-type]
    answer = parse(request["answer"], parsing_timeout=None)  # type: ignore[arg-type]
    correct = bool(gold and answer) and verify(
        gold,
        answer,
        float_rounding=request["float_rounding"],
        strict=request["strict"],
        timeout_seconds=None,  # type: ignore[arg-type]
    )
    return {"gold_ok": bool(gold), "found": bool(answer), "correct": bool(correct)}


def main() -> None:
    """Serve requests until stdin closes (the parent exited or closed this worker)."""
    channel = _protocol_channel()
    try:
        import math_verify  # noqa: F401  (imported before 'ready', not inside a sample's time)
    except Exception as exc:  # e.g. sympy missing: the parent names it in its one error line
        channel.write(json.dumps({"error": f"{type(exc).__name__}: {exc}"}) + "\n")
        sys.exit(1)
    for name in ("math_verify.parser", "math_verify.grader"):
        logging.getLogger(name).addFilter(_NoTimeoutNotice())
    channel.write('{"ready": true}\n')
    for line in iter(sys.stdin.readline, ""):
        request = json.loads(line)
        _limit_cpu(float(request["limit_s"]))
        try:
            reply: dict[str, Any] = _score(request)
        except Exception as exc:  # the parent raises it as the reward function's error
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        channel.write(json.dumps(reply) + "\n")


if __name__ == "__main__":
    main()
