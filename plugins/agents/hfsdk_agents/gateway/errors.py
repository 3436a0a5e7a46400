"""The gateway's errors, answered as OpenAI-style error bodies."""

from __future__ import annotations

from typing import Any


class GatewayError(Exception):
    """A request the gateway refuses: HTTP ``status`` and an OpenAI-style error body.

    ``code`` is the machine-readable reason (``unknown_session``,
    ``malformed_messages``, ``context_length_exceeded``, ``max_turns_exceeded``, ...).
    """

    def __init__(self, status: int, message: str, *, code: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param

    @property
    def body(self) -> dict[str, Any]:
        """``{"error": {"message", "type", "param", "code"}}`` as the ``openai`` SDK reads it."""
        kind = "invalid_request_error" if self.status < 500 else "server_error"
        return {
            "error": {"message": self.message, "type": kind, "param": self.param, "code": self.code}
        }


def bad_request(
    message: str, *, code: str = "invalid_request", param: str | None = None
) -> GatewayError:
    """A 400 with ``message`` (what was wrong, what was expected)."""
    return GatewayError(400, message, code=code, param=param)
