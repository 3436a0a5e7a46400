"""The scripted conversation both template-family golden tests run (tool loop, gateway).

The model adds 3 + 4, then 7 + 5, then answers; each family writes its tool calls
its own way (hermes for the Qwen-style templates, ``<function=...>`` for Llama-3),
and the Qwen3-style families think before each call (``qwen3-real`` before its answer too).
"""

from __future__ import annotations

from typing import Any

from hfsdk_agents.tools import load_tools
from hfsdk_testing.chat_templates import (
    llama3_tokenizer,
    qwen3_real_tokenizer,
    qwen3_tokenizer,
    qwen25_tokenizer,
)

SCHEMAS = [dict(t.schema) for t in load_tools(["add"]).values()]
PROMPT = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What is 3 + 4 + 5?"},
]
THINK = "<think>\nI should call the tool to add the numbers first.\n</think>\n\n"
ANSWER = "The answer is 12."


def hermes(a: int, b: int) -> str:
    return f'<tool_call>\n{{"name": "add", "arguments": {{"a": {a}, "b": {b}}}}}\n</tool_call>'


def llama_call(a: int, b: int) -> str:
    return f'<function=add>{{"a": {a}, "b": {b}}}</function>'


FAMILIES: dict[str, dict[str, Any]] = {
    "qwen2.5": {"tokenizer": qwen25_tokenizer, "call": hermes, "parser": "hermes", "think": ""},
    "llama3": {
        "tokenizer": llama3_tokenizer,
        "call": llama_call,
        "parser": "llama_function",
        "think": "",
    },
    "qwen3": {"tokenizer": qwen3_tokenizer, "call": hermes, "parser": "hermes", "think": THINK},
    # Qwen3's own template keeps reasoning within a query and gives the last assistant
    # turn a think block, so this model thinks before its answer too (as Qwen3 does).
    "qwen3-real": {
        "tokenizer": qwen3_real_tokenizer,
        "call": hermes,
        "parser": "hermes",
        "think": THINK,
        "answer_think": THINK,
    },
}


def model_turns(family: dict[str, Any]) -> list[str]:
    """The model's three turns: add(3, 4), add(7, 5), the answer (with thinking, qwen3)."""
    call, think = family["call"], family["think"]
    return [think + call(3, 4), think + call(7, 5), family.get("answer_think", "") + ANSWER]
