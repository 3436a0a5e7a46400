"""Chat-template turn markers: where the template puts them, and which are the model's."""

from __future__ import annotations

import pytest

from hfsdk import HfsdkError, generate_rollout

from .fakes import prompt_batch, rollout_for, word_tokenizer

TEMPLATE = (
    "{% for m in messages %}<|im_start|> {{ m.role }} {{ m.content }} <|im_end|> NL "
    "{% endfor %}{% if add_generation_prompt %}<|im_start|> assistant {% endif %}"
)
CALL = '{"name":"add","arguments":{"a":3,"b":4}}'
WORDS = [
    "<|im_start|>",
    "<|im_end|>",
    "NL",
    "user",
    "assistant",
    "tool",
    "x",
    "y",
    "q",
    "<tool_call>",
    "</tool_call>",
    CALL,
    "7",
    "3",
]
TOK = word_tokenizer(WORDS, template=TEMPLATE)
T = {w: TOK.convert_tokens_to_ids(w) for w in WORDS}


def script(context: list[int]) -> list[int]:
    if T["tool"] in context:
        return [T["7"], T["<|im_end|>"], T["x"]]
    return [T["<tool_call>"], T[CALL], T["</tool_call>"], T["y"]]


def test_markers_follow_the_template_and_only_model_tokens_train() -> None:
    rollout = rollout_for(
        TOK,
        script,
        tools=["add"],
        renderer="chat_template",
        stop_token_ids=(T["<|im_end|>"],),
        max_response_tokens=24,
    )
    prompt = "<|im_start|> user q <|im_end|> NL <|im_start|> assistant"
    out = generate_rollout(rollout, prompt_batch(TOK, [prompt]))
    model1 = [T["<tool_call>"], T[CALL], T["</tool_call>"]]
    # the model stopped at </tool_call>: the template's <|im_end|> opens the tool turn (context)
    tool = [
        T[w]
        for w in [
            "<|im_end|>",
            "NL",
            "<|im_start|>",
            "tool",
            "7",
            "<|im_end|>",
            "NL",
            "<|im_start|>",
            "assistant",
        ]
    ]
    model2 = [T["7"], T["<|im_end|>"]]  # its own end-of-turn token is the model's
    expected = [*model1, *tool, *model2]
    assert out["responses"][0, : len(expected)].tolist() == expected
    mask = [1] * len(model1) + [0] * len(tool) + [1] * len(model2)
    assert out["response_mask"][0, : len(expected)].tolist() == mask
    assert out["response_mask"][0, len(expected) :].sum() == 0
    # a rendering of the same conversation by the template gives the same ids
    full = TOK.apply_chat_template(
        [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": f"<tool_call> {CALL} </tool_call>"},
            {"role": "tool", "content": "7"},
            {"role": "assistant", "content": "7"},
        ],
        tokenize=True,
    )
    full = list(full["input_ids"] if hasattr(full, "keys") else full)
    produced = [*TOK.encode(prompt, add_special_tokens=False), *expected]
    assert produced == full[: len(produced)]


def test_tool_schemas_reach_the_prompt_through_the_template() -> None:
    from hfsdk_agents.tools import load_tools
    from hfsdk_datasets import prepare_row

    template = (
        "{% if tools %}<tools> {% for t in tools %}{{ t.function.name }} "
        "{{ t.function.parameters.required | join(' ') }} {% endfor %}</tools> {% endif %}"
        + TEMPLATE
    )
    tok = word_tokenizer([*WORDS, "<tools>", "</tools>", "add", "a", "b"], template=template)
    schemas = [dict(t.schema) for t in load_tools(["add"]).values()]
    row = prepare_row({"prompt": "q"}, 0, "prompt", tok, True, schemas)
    assert row.row["rendered_prompt"].startswith("<tools> add a b </tools> <|im_start|> user q")
    plain = prepare_row({"prompt": "q"}, 0, "prompt", tok, True)
    assert plain.row["rendered_prompt"].startswith("<|im_start|> user q")


def test_a_turn_ended_by_the_models_own_end_token_keeps_it_trained() -> None:
    call = '<function=add>{"a":3,"b":4}</function>'
    tok = word_tokenizer([*WORDS, call], template=TEMPLATE)
    ids = {w: tok.convert_tokens_to_ids(w) for w in [*WORDS, call]}

    def own_end(context: list[int]) -> list[int]:
        if ids["tool"] in context:
            return [ids["7"], ids["<|im_end|>"]]
        return [ids[call], ids["<|im_end|>"], ids["x"]]

    rollout = rollout_for(
        tok,
        own_end,
        tools=["add"],
        renderer="chat_template",
        parser="llama_function",
        stop_token_ids=(ids["<|im_end|>"],),
        max_response_tokens=24,
    )
    prompt = "<|im_start|> user q <|im_end|> NL <|im_start|> assistant"
    out = generate_rollout(rollout, prompt_batch(tok, [prompt]))
    model1 = [ids[call], ids["<|im_end|>"]]  # "</function>" is no token: <|im_end|> stops
    tool = [
        ids[w]
        for w in [
            "NL",
            "<|im_start|>",
            "tool",
            "7",
            "<|im_end|>",
            "NL",
            "<|im_start|>",
            "assistant",
        ]
    ]
    model2 = [ids["7"], ids["<|im_end|>"]]
    expected = [*model1, *tool, *model2]
    assert out["responses"][0, : len(expected)].tolist() == expected
    mask = [1] * len(model1) + [0] * len(tool) + [1] * len(model2)
    assert out["response_mask"][0, : len(expected)].tolist() == mask
    assert out["agent_trajectory"][0]["segments"][1]["tool_results"][0]["content"] == "7"


def test_a_template_that_refuses_the_conversation_says_to_render_plain() -> None:
    # Gemma/Mistral-style: roles must alternate user/assistant, so a tool turn is refused
    strict = (
        "{% for m in messages %}"
        "{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}"
        "{{ raise_exception('Conversation roles must alternate user/assistant') }}"
        "{% endif %}<|im_start|> {{ m.role }} {{ m.content }} <|im_end|> NL "
        "{% endfor %}{% if add_generation_prompt %}<|im_start|> assistant {% endif %}"
    )
    tok = word_tokenizer(WORDS, template=strict)
    rollout = rollout_for(
        tok,
        script,
        tools=["add"],
        renderer="chat_template",
        stop_token_ids=(T["<|im_end|>"],),
        max_response_tokens=24,
    )
    prompt = "<|im_start|> user q <|im_end|> NL <|im_start|> assistant"
    with pytest.raises(HfsdkError) as info:
        generate_rollout(rollout, prompt_batch(tok, [prompt]))
    message = str(info.value)
    assert "Conversation roles must alternate user/assistant" in message
    assert "rollout.multi_turn.renderer: plain" in message
