"""Chat-template fixtures: four template families on tokenizers built here (no downloads).

Each tokenizer is a byte-level BPE trained in a few milliseconds on a small corpus
of chat and tool-call text, with its family's marker tokens, and one of these
Jinja templates (written for these tests in the manner of the families, not
copied from any model repository):

- :data:`QWEN25_TEMPLATE` (Qwen2.5-style): ChatML turns (``<|im_start|>ROLE`` …
  ``<|im_end|>``), tool schemas in the system turn, ``<tool_call>`` JSON calls and
  tool results as ``<tool_response>`` blocks inside one user turn.
- :data:`QWEN3_TEMPLATE` (Qwen3-style with thinking): the same, but an earlier
  assistant turn is rendered without its ``<think>…</think>`` block, so a
  conversation rendered again is no longer the token stream the model produced
  (a step-wise trajectory's new segment). Qwen3's own template keeps reasoning
  after the last user message; this one drops all of it (as QwQ-style templates do),
  so a plain tool loop shows the case.
- :data:`QWEN3_REAL_TEMPLATE` (Qwen3's own logic, Apache-2.0): an assistant turn after
  the last user query keeps its reasoning as ``<think>…</think>``; the LAST assistant
  turn always gets a think block (empty when it has no reasoning), an earlier one
  without reasoning gets none. A renderer that reads a turn's ids off a rendering
  ending with an assistant turn meets that empty block (a regression fixture).
- :data:`LLAMA3_TEMPLATE` (Llama-3-style): ``<|begin_of_text|>``, header ids
  (``<|start_header_id|>ROLE<|end_header_id|>``), ``<|eot_id|>``, tool results in
  the ``ipython`` role, the tools described in the system turn.

The tokenizers are cached per process; use them read-only.
"""

from __future__ import annotations

import functools
from typing import Any

_QWEN_HEAD = r"""
{%- set ns = namespace(system='You are a helpful assistant.', start=0) %}
{%- if messages and messages[0].role == 'system' %}
{%- set ns.system = messages[0].content %}{% set ns.start = 1 %}
{%- endif %}
{{- '<|im_start|>system\n' + ns.system }}
{%- if tools %}
{{- '\n\n# Tools\n\nYou may call the functions below. Each call is a JSON object with name '
    + 'and arguments inside <tool_call></tool_call> tags.\n<tools>' }}
{%- for tool in tools %}{{ '\n' + (tool | tojson) }}{% endfor %}
{{- '\n</tools>' }}
{%- endif %}
{{- '<|im_end|>\n' }}
{%- for message in messages[ns.start:] %}
{%- if message.role == 'tool' %}
{%- if loop.first or loop.previtem.role != 'tool' %}{{ '<|im_start|>user' }}{% endif %}
{{- '\n<tool_response>\n' + message.content + '\n</tool_response>' }}
{%- if loop.last or loop.nextitem.role != 'tool' %}{{ '<|im_end|>\n' }}{% endif %}
{%- elif message.role == 'assistant' %}
{%- set content = message.content or '' %}
"""

_QWEN_CALLS_AND_TAIL = r"""
{{- '<|im_start|>assistant\n' + content }}
{%- for call in message.tool_calls or [] %}
{%- set fn = call.function or call %}
{%- set args = fn.arguments if fn.arguments is string else (fn.arguments | tojson) %}
{{- ('\n' if content or not loop.first else '') + '<tool_call>\n{"name": "' + fn.name
    + '", "arguments": ' + args + '}\n</tool_call>' }}
{%- endfor %}
{{- '<|im_end|>\n' }}
{%- else %}
{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}
"""

_DROP_THINKING = r"""
{%- if '</think>' in content %}
{%- set content = content.split('</think>')[-1].lstrip('\n') %}
{%- endif %}
"""

QWEN25_TEMPLATE = (_QWEN_HEAD + _QWEN_CALLS_AND_TAIL).strip()
"""Qwen2.5-style: ChatML, tools in the system turn, ``<tool_call>`` / ``<tool_response>``."""

QWEN3_TEMPLATE = (_QWEN_HEAD + _DROP_THINKING + _QWEN_CALLS_AND_TAIL).strip()
"""Qwen3-style: Qwen2.5's, with every assistant turn's ``<think>…</think>`` dropped."""

QWEN3_REAL_TEMPLATE = r"""
{%- if tools %}
{{- '<|im_start|>system\n' }}
{%- if messages[0].role == 'system' %}{{ messages[0].content + '\n\n' }}{% endif %}
{{- '# Tools\n\nYou may call one or more functions to assist with the user query.\n\n'
    + 'You are provided with function signatures within <tools></tools> XML tags:\n<tools>' }}
{%- for tool in tools %}{{ '\n' + (tool | tojson) }}{% endfor %}
{{- '\n</tools>\n\nFor each function call, return a json object with function name and '
    + 'arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": '
    + '<function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n' }}
{%- elif messages[0].role == 'system' %}
{{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
{%- set index = (messages|length - 1) - loop.index0 %}
{%- if ns.multi_step_tool and message.role == 'user' and message.content is string
      and not (message.content.startswith('<tool_response>')
               and message.content.endswith('</tool_response>')) %}
{%- set ns.multi_step_tool = false %}{% set ns.last_query_index = index %}
{%- endif %}
{%- endfor %}
{%- for message in messages %}
{%- set content = message.content if message.content is string else '' %}
{%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}
{{- '<|im_start|>' + message.role + '\n' + content + '<|im_end|>\n' }}
{%- elif message.role == 'assistant' %}
{%- set reasoning = '' %}
{%- if message.reasoning_content is string %}
{%- set reasoning = message.reasoning_content %}
{%- elif '</think>' in content %}
{%- set reasoning = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
{%- set content = content.split('</think>')[-1].lstrip('\n') %}
{%- endif %}
{%- if loop.index0 > ns.last_query_index and (loop.last or reasoning) %}
{{- '<|im_start|>assistant\n<think>\n' + reasoning.strip('\n') + '\n</think>\n\n'
    + content.lstrip('\n') }}
{%- else %}
{{- '<|im_start|>assistant\n' + content }}
{%- endif %}
{%- for call in message.tool_calls or [] %}
{%- set fn = call.function or call %}
{%- set args = fn.arguments if fn.arguments is string else (fn.arguments | tojson) %}
{{- ('\n' if content or not loop.first else '') + '<tool_call>\n{"name": "' + fn.name
    + '", "arguments": ' + args + '}\n</tool_call>' }}
{%- endfor %}
{{- '<|im_end|>\n' }}
{%- elif message.role == 'tool' %}
{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}{{ '<|im_start|>user' }}{% endif %}
{{- '\n<tool_response>\n' + content + '\n</tool_response>' }}
{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{ '<|im_end|>\n' }}{% endif %}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<|im_start|>assistant\n' }}
{%- if enable_thinking is defined and enable_thinking is false %}
{{- '<think>\n\n</think>\n\n' }}
{%- endif %}
{%- endif %}
""".strip()
"""Qwen3's logic: reasoning kept after the last user query, an empty think block on the
last assistant turn, ``enable_thinking=False`` opens the next turn with an empty one."""

LLAMA3_TEMPLATE = r"""
{{- bos_token }}
{%- set ns = namespace(system='', start=0) %}
{%- if messages and messages[0].role == 'system' %}
{%- set ns.system = messages[0].content | trim %}{% set ns.start = 1 %}
{%- endif %}
{{- '<|start_header_id|>system<|end_header_id|>\n\n' }}
{%- if tools %}
{{- 'Environment: ipython\nYou may call these functions as <function=NAME>{"ARG": VALUE}'
    + '</function>:\n' }}
{%- for tool in tools %}{{ (tool | tojson) + '\n' }}{% endfor %}
{{- '\n' }}
{%- endif %}
{{- ns.system + '<|eot_id|>' }}
{%- for message in messages[ns.start:] %}
{%- set role = 'ipython' if message.role == 'tool' else message.role %}
{{- '<|start_header_id|>' + role + '<|end_header_id|>\n\n' + (message.content or '') | trim }}
{%- for call in message.tool_calls or [] %}
{%- set fn = call.function or call %}
{{- '<function=' + fn.name + '>'
    + (fn.arguments if fn.arguments is string else (fn.arguments | tojson)) + '</function>' }}
{%- endfor %}
{{- '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}
""".strip()
"""Llama-3-style: header ids, ``<|eot_id|>``, tool results in the ``ipython`` role."""

_CORPUS = [
    "You are a helpful assistant.",
    "What is 3 + 4? Use the tool to add numbers.",
    "Please add 12 and 30 with the calculator, then answer with the number.",
    '{"name": "add", "arguments": {"a": 3, "b": 4}}',
    '{"a": 12, "b": 30}',
    '{"type": "function", "function": {"name": "add", "description": "Add two integers.", '
    '"parameters": {"type": "object", "properties": {"a": {"type": "integer"}, '
    '"b": {"type": "integer"}}, "required": ["a", "b"]}}}',
    "I should call the tool to add the numbers first.",
    "The answer is 7.",
    "0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 30 40 42",
    "# Tools\n\nYou may call the functions below. Each call is a JSON object with name "
    "and arguments inside tags.",
    "Environment: ipython\nYou may call these functions as",
    "system user assistant tool ipython\n\n",
]

_QWEN_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
_QWEN_MARKERS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]
_THINK_MARKERS = ["<think>", "</think>"]
_LLAMA_SPECIAL = [
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|finetune_right_pad_id|>",
]


_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def _byte_bpe(specials: list[str], markers: list[str], vocab_size: int = 420) -> Any:
    """A byte-level BPE trained on the corpus; ``markers`` are added as non-special tokens."""
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
        trainers,
    )

    tokenizer = Tokenizer(models.BPE())
    # Split like the families' tokenizers (newline runs are one piece, digits in threes),
    # then bytes: the split decides which ids a rendering gets, so it must be theirs.
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(_SPLIT), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_CORPUS, trainer)
    # Like the families' own: the call and reasoning markers are tokens, but not "special"
    # (decoding with skip_special_tokens keeps them, so rewards read them).
    tokenizer.add_tokens([AddedToken(m, special=False, normalized=False) for m in markers])
    return tokenizer


def _wrap(tokenizer: Any, template: str, **specials: str) -> Any:
    from transformers import PreTrainedTokenizerFast

    out = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, clean_up_tokenization_spaces=False, **specials
    )
    out.chat_template = template
    return out


@functools.cache
def qwen25_tokenizer() -> Any:
    """A Qwen2.5-style tokenizer: ChatML markers, ``<tool_call>``, :data:`QWEN25_TEMPLATE`."""
    bpe = _byte_bpe(_QWEN_SPECIAL, _QWEN_MARKERS)
    return _wrap(bpe, QWEN25_TEMPLATE, eos_token="<|im_end|>", pad_token="<|endoftext|>")


@functools.cache
def qwen3_tokenizer() -> Any:
    """A Qwen3-style tokenizer: Qwen2.5's plus ``<think>``/``</think>``, :data:`QWEN3_TEMPLATE`."""
    bpe = _byte_bpe(_QWEN_SPECIAL, [*_QWEN_MARKERS, *_THINK_MARKERS])
    return _wrap(bpe, QWEN3_TEMPLATE, eos_token="<|im_end|>", pad_token="<|endoftext|>")


@functools.cache
def qwen3_real_tokenizer() -> Any:
    """Qwen3's tokenizer markers with :data:`QWEN3_REAL_TEMPLATE` (Qwen3's own template logic)."""
    bpe = _byte_bpe(_QWEN_SPECIAL, [*_QWEN_MARKERS, *_THINK_MARKERS])
    return _wrap(bpe, QWEN3_REAL_TEMPLATE, eos_token="<|im_end|>", pad_token="<|endoftext|>")


@functools.cache
def llama3_tokenizer() -> Any:
    """A Llama-3-style tokenizer: header ids, ``<|eot_id|>``, :data:`LLAMA3_TEMPLATE`."""
    bpe = _byte_bpe(_LLAMA_SPECIAL, [])
    return _wrap(
        bpe,
        LLAMA3_TEMPLATE,
        bos_token="<|begin_of_text|>",
        eos_token="<|eot_id|>",
        pad_token="<|finetune_right_pad_id|>",
    )


FAMILIES = {
    "qwen2.5": qwen25_tokenizer,
    "qwen3": qwen3_tokenizer,
    "qwen3-real": qwen3_real_tokenizer,
    "llama3": llama3_tokenizer,
}
"""Family name -> its tokenizer factory."""
