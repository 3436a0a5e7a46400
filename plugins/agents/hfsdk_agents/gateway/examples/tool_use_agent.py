"""The ``tool_use`` task's agent, written only against the ``openai`` SDK.

It is what the built-in ``tool_loop`` does, as a program: ask the model, run the
``add`` calls it makes, send the results back, until it answers without a call
or has had two turns (the task's ``max_turns``). Registered as the agent
``tool_use``: ``hfsdk run --algo grpo --task tool_use rollout.multi_turn.agent=tool_use``.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import openai

MAX_TURNS = 2
ADD_TOOL = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two integers.",
        "parameters": {
            "type": "object",
            "properties": {
                "a": {"type": "integer", "description": "The first number."},
                "b": {"type": "integer", "description": "The second number."},
            },
            "required": ["a", "b"],
        },
    },
}


def add(a: int, b: int) -> int:
    """The calculator the model calls."""
    return int(a) + int(b)


def run_call(name: str, arguments: str) -> str:
    """One tool call's answer (an error message for a bad one, as the tool loop gives)."""
    try:
        if name != "add":
            return f"Error: unknown tool {name!r}"
        return json.dumps(add(**json.loads(arguments)))
    except (TypeError, ValueError) as err:
        return f"Error: add: {err}"


@functools.cache
def http_client() -> openai.DefaultHttpxClient:
    """One connection pool for every session of this process.

    A new ``openai.OpenAI`` builds its own HTTP client, and with it a TLS context
    that loads the CA bundle: about 20 ms of CPU, holding the GIL, even for a
    plain-HTTP loopback URL. Per trajectory that cost more than the model's turn.
    """
    return openai.DefaultHttpxClient()


def tool_use_agent(base_url: str, row: dict[str, Any]) -> float | None:
    """Solve one ``tool_use`` prompt; the run's ``tool_use`` reward scores it (returns None)."""
    client = openai.OpenAI(
        base_url=base_url, api_key="unused", max_retries=0, http_client=http_client()
    )
    messages: list[Any] = [{"role": "user", "content": row["raw_prompt"]}]
    for _ in range(MAX_TURNS):
        reply = client.chat.completions.create(model="policy", messages=messages, tools=[ADD_TOOL])
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            break
        for call in message.tool_calls:
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call.id,
                    "content": run_call(call.function.name, call.function.arguments),
                }
            )
    return None
