"""Supervised sequences: the loss mask is exact token by token, with and without a chat template."""

from __future__ import annotations

import pytest

from hfsdk import HfsdkError
from hfsdk_supervised_data import collate_supervised, split_conversation, tokenize_supervised

from .conftest import TEMPLATE


def _words(tokenizer, ids) -> list[str]:  # type: ignore[no-untyped-def]
    return tokenizer.convert_ids_to_tokens(list(ids))


def _trained(tokenizer, seq) -> list[str]:  # type: ignore[no-untyped-def]
    return [w for w, m in zip(_words(tokenizer, seq.response_ids), seq.loss_mask, strict=True) if m]


def test_single_turn_with_template_trains_the_reply_and_its_end_of_turn(make_tokenizer) -> None:
    tok = make_tokenizer()
    seq = tokenize_supervised(
        [{"role": "user", "content": "add one two"}], "three", tok, use_template=True
    )
    assert _words(tok, seq.prompt_ids) == [
        "<|user|>",
        "add",
        "one",
        "two",
        "<|end|>",
        "<|assistant|>",
    ]
    assert _words(tok, seq.response_ids) == ["three", "<|end|>", "</s>"]
    assert list(seq.loss_mask) == [1, 1, 1]


def test_multi_turn_masks_user_turns_and_generation_cues_token_by_token(make_tokenizer) -> None:
    tok = make_tokenizer()
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "add one two"},
        {"role": "assistant", "content": "three"},
        {"role": "user", "content": "again"},
        {"role": "assistant", "content": "ok four"},
    ]
    prompt, response = split_conversation(messages, "row 0")
    assert [m["role"] for m in prompt] == ["system", "user"]
    seq = tokenize_supervised(prompt, response, tok, use_template=True)
    words = _words(tok, seq.response_ids)
    assert words == [
        "three", "<|end|>",                       # assistant: trained
        "<|user|>", "again", "<|end|>",           # user turn: context
        "<|assistant|>",                          # the cue before the next reply: context
        "ok", "four", "<|end|>",                  # assistant: trained
        "</s>",
    ]  # fmt: skip
    assert list(seq.loss_mask) == [1, 1, 0, 0, 0, 0, 1, 1, 1, 1]
    # The trained text is exactly the assistant contents and their end-of-turn markers.
    assert _trained(tok, seq) == ["three", "<|end|>", "ok", "four", "<|end|>", "</s>"]
    # Prompt + response re-render the whole conversation (nothing lost or doubled).
    full = tok.apply_chat_template(messages, tokenize=False)
    assert _words(tok, seq.prompt_ids + seq.response_ids)[:-1] == full.split()


def test_plain_rendering_without_template(make_tokenizer) -> None:
    tok = make_tokenizer(None)
    seq = tokenize_supervised("add one two", "three", tok, use_template=False)
    assert _words(tok, seq.prompt_ids) == ["add", "one", "two"]
    assert _words(tok, seq.response_ids) == ["three", "</s>"]
    assert seq.trained_tokens == 2


def test_plain_rendering_starts_every_reply_right_after_its_assistant_cue() -> None:
    # Before: later replies got "assistant:\n4", a trained newline a rollout of the same
    # history (which continues right after "assistant:") never produces.
    from hfsdk_testing.chat_templates import qwen25_tokenizer

    tok = qwen25_tokenizer()
    prompt = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "3 + 5 ="}]
    reply = [
        {"role": "assistant", "content": "8"},
        {"role": "user", "content": "2 + 2 ="},
        {"role": "assistant", "content": "4"},
    ]
    seq = tokenize_supervised(prompt, reply, tok, use_template=False)
    assert tok.decode(seq.prompt_ids + seq.response_ids) == (
        "system: be brief\nuser: 3 + 5 =\nassistant:8\nuser: 2 + 2 =\nassistant:4<|im_end|>"
    )
    trained = tok.decode([i for i, m in zip(seq.response_ids, seq.loss_mask, strict=True) if m])
    assert trained == "84<|im_end|>"
    # Two replies in a row are still one newline apart.
    both = [{"role": "assistant", "content": "A"}, {"role": "assistant", "content": "B"}]
    seq = tokenize_supervised("hi", both, tok, use_template=False)
    assert tok.decode(seq.response_ids) == "A\nB<|im_end|>"


def test_plain_rendering_puts_a_response_that_opens_with_a_user_turn_on_its_own_line() -> None:
    # Before: "Question: hiuser: more context" - the response's user turn was glued to the
    # prompt's last word.
    from hfsdk_testing.chat_templates import qwen25_tokenizer

    tok = qwen25_tokenizer()
    reply = [{"role": "user", "content": "more context"}, {"role": "assistant", "content": "ok"}]
    seq = tokenize_supervised("Question: hi", reply, tok, use_template=False)
    assert tok.decode(seq.prompt_ids + seq.response_ids) == (
        "Question: hi\nuser: more context\nassistant:ok<|im_end|>"
    )
    trained = tok.decode([i for i, m in zip(seq.response_ids, seq.loss_mask, strict=True) if m])
    assert trained == "ok<|im_end|>"


def test_eos_is_not_doubled_and_can_be_left_out(make_tokenizer) -> None:
    tok = make_tokenizer(None)
    assert _words(tok, tokenize_supervised("add", "one </s>", tok, use_template=False).response_ids) == [
        "one", "</s>"
    ]  # fmt: skip
    seq = tokenize_supervised("add", "one", tok, use_template=False, append_eos=False)
    assert _words(tok, seq.response_ids) == ["one"]


@pytest.mark.parametrize("use_template", [False, True])
def test_the_eos_follows_the_last_assistant_turn_not_a_trailing_user_turn(
    make_tokenizer, use_template: bool
) -> None:
    # Before (plain rendering): "three user: again assistant: </s>", an empty reply to "again"
    # trained and no stop after "three".
    tok = make_tokenizer()
    reply = [{"role": "assistant", "content": "three"}, {"role": "user", "content": "again"}]
    seq = tokenize_supervised("add one two", reply, tok, use_template=use_template)
    assert _words(tok, seq.response_ids) == (
        ["three", "<|end|>", "</s>"] if use_template else ["three", "</s>"]
    )
    assert all(seq.loss_mask)


def test_a_template_that_ends_the_turn_with_the_eos_gets_no_second_one(make_tokenizer) -> None:
    # As Qwen's "<|im_end|>\n" (the EOS, then a newline): before, "</s>" was trained twice.
    template = TEMPLATE.replace("<|end|> {% endfor %}", "</s> <|end|> {% endfor %}")
    tok = make_tokenizer(template)
    seq = tokenize_supervised([{"role": "user", "content": "add"}], "one", tok, use_template=True)
    # What the template adds after the EOS is cut: a rollout's response ends at the EOS.
    assert _words(tok, seq.response_ids) == ["one", "</s>"]


def test_a_qwen_response_ends_at_its_eos_not_the_newline_after_it() -> None:
    # Before: "A<|im_end|>\n" was trained, so a reward model scored the "\n" a rollout never
    # samples (its response ends at the first EOS, where the `reward` role reads the score).
    from hfsdk_testing.chat_templates import qwen25_tokenizer

    tok = qwen25_tokenizer()
    seq = tokenize_supervised("hi", "A", tok, use_template=True)
    assert seq.response_ids[-1] == tok.eos_token_id
    assert tok.decode(seq.response_ids) == "A<|im_end|>"
    assert all(seq.loss_mask)


def test_only_the_tail_after_the_final_eos_is_cut_middle_turns_keep_theirs() -> None:
    from hfsdk_testing.chat_templates import qwen25_tokenizer

    tok = qwen25_tokenizer()
    context = [{"role": "user", "content": "hi"}]
    reply = [
        {"role": "assistant", "content": "A"},
        {"role": "user", "content": "more"},
        {"role": "assistant", "content": "B"},
    ]
    seq = tokenize_supervised(context, reply, tok, use_template=True)
    rendered = tok.apply_chat_template([*context, *reply], tokenize=False)
    response_text = tok.decode(seq.response_ids)
    # The middle assistant turn keeps its "<|im_end|>\n" (untrained "\n"); only the final one goes.
    assert (
        response_text
        == "A<|im_end|>\n<|im_start|>user\nmore<|im_end|>\n<|im_start|>assistant\nB<|im_end|>"
    )
    assert tok.decode(seq.prompt_ids) + response_text + "\n" == rendered
    trained = tok.decode([i for i, m in zip(seq.response_ids, seq.loss_mask, strict=True) if m])
    assert trained == "A<|im_end|>B<|im_end|>"


@pytest.mark.parametrize("family", ["qwen2.5", "llama3"])
def test_an_earlier_assistant_turn_trains_up_to_its_eos_not_the_template_text_after_it(
    family: str,
) -> None:
    # Before (Qwen): the "\n" after the first "<|im_end|>" had mask 1, though a rollout's turn
    # ends at the EOS and the agents' renderer makes that "\n" context of the next turn.
    from hfsdk_testing.chat_templates import FAMILIES

    tok = FAMILIES[family]()
    messages = [
        {"role": "user", "content": "What is 2+3?"},
        {"role": "assistant", "content": "Let me think."},
        {"role": "user", "content": "go on"},
        {"role": "assistant", "content": "It is 5."},
    ]
    prompt, response = split_conversation(messages, "row 0")
    seq = tokenize_supervised(prompt, response, tok, use_template=True)
    first_eos = seq.response_ids.index(tok.eos_token_id)
    assert all(seq.loss_mask[: first_eos + 1])  # the first reply and its EOS: trained
    assert seq.loss_mask[first_eos + 1] == 0  # the template text after it: context
    if family == "qwen2.5":
        assert tok.decode(seq.response_ids[first_eos + 1]) == "\n"
    trained = tok.decode([i for i, m in zip(seq.response_ids, seq.loss_mask, strict=True) if m])
    assert trained.endswith(
        "<|im_end|>It is 5.<|im_end|>" if family == "qwen2.5" else "5.<|eot_id|>"
    )


def test_multi_turn_masks_match_the_agents_renderers() -> None:
    # The RL renderer's turns: the model's reply (trained), then the template's context turn.
    trajectory = pytest.importorskip("hfsdk_agents.trajectory")
    from hfsdk_testing.chat_templates import qwen25_tokenizer

    tok = qwen25_tokenizer()
    eos = tok.eos_token_id
    renderer = trajectory.ChatTemplateRenderer(tokenizer=tok, stop_ids=(eos,))
    context = [{"role": "user", "content": "hi"}]
    reply = [
        {"role": "assistant", "content": "A"},
        {"role": "user", "content": "more"},
        {"role": "assistant", "content": "B"},
    ]
    seq = tokenize_supervised(context, reply, tok, use_template=True)
    turns = [
        (tok("A<|im_end|>", add_special_tokens=False).input_ids, 1),
        (renderer.user_turn("more", last_token=eos), 0),
        (tok("B<|im_end|>", add_special_tokens=False).input_ids, 1),
    ]
    assert list(seq.prompt_ids) == renderer.render_conversation(context)
    assert list(seq.response_ids) == [i for ids, _ in turns for i in ids]
    assert list(seq.loss_mask) == [m for ids, m in turns for _ in ids]


@pytest.mark.parametrize("use_template", [False, True])
def test_an_empty_answer_is_refused_rather_than_trained_as_an_instant_stop(
    make_tokenizer, use_template
) -> None:  # type: ignore[no-untyped-def]
    tok = make_tokenizer() if use_template else make_tokenizer(None)
    for empty in ("", "  ", [{"role": "assistant", "content": ""}]):
        with pytest.raises(HfsdkError, match="row 2: the response's assistant text is empty"):
            tokenize_supervised("add", empty, tok, use_template=use_template, where="row 2")


@pytest.mark.parametrize(
    ("messages", "needle"),
    [
        ([{"role": "user", "content": "add"}], "no assistant message"),
        ([{"role": "assistant", "content": "one"}], "an assistant message first"),
    ],
)
def test_conversations_without_a_reply_are_one_line_errors(messages, needle) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(HfsdkError, match=needle):
        split_conversation(messages, "row 3")


def test_a_template_whose_renderings_do_not_extend_each_other_is_refused(make_tokenizer) -> None:
    # Puts the message count first: a longer conversation does not extend a shorter one.
    odd = "{{ messages|length }} {% for m in messages %}{{ m['content'] }} {% endfor %}"
    tok = make_tokenizer(odd)
    with pytest.raises(HfsdkError, match="prefixes"):
        tokenize_supervised("add", "one", tok, use_template=True, where="row 1")


def test_collate_left_pads_prompts_right_pads_responses(make_tokenizer) -> None:
    tok = make_tokenizer(None)
    a = tokenize_supervised("add one two", "three", tok, use_template=False)
    b = tokenize_supervised("add", "one two three", tok, use_template=False)
    t = collate_supervised([a, b], tok.pad_token_id)
    pad = tok.pad_token_id
    assert t["prompts"].tolist() == [list(a.prompt_ids), [pad, pad, *b.prompt_ids]]
    assert t["responses"].tolist() == [[*a.response_ids, pad, pad], list(b.response_ids)]
    assert t["response_mask"].tolist() == [[1, 1, 0, 0], [1, 1, 1, 1]]
    assert t["attention_mask"].tolist() == [[1, 1, 1, 1, 1, 0, 0], [0, 0, 1, 1, 1, 1, 1]]
    assert t["position_ids"][1].tolist() == [0, 0, 0, 1, 2, 3, 4]
    assert t["input_ids"].shape == (2, 7)


# A template that renders tool calls and the tools offered, one word per token.
TOOL_TEMPLATE = (
    "{% if tools %}<|system|> {% for t in tools %}{{ t['function']['name'] }} {% endfor %}"
    "<|end|> {% endif %}{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} "
    "{% for c in m.get('tool_calls', []) %}call {{ c['function']['name'] }} "
    "{{ c['function']['arguments']['x'] }} {% endfor %}<|end|> {% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
# The OpenAI form: content None, arguments a JSON string.
CALLING = [
    {"role": "user", "content": "add one two"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"x": "two"}'}}],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "three"},
    {"role": "assistant", "content": "three"},
]  # fmt: skip


def test_tool_call_turns_train_the_calls_and_mask_the_results(make_tokenizer) -> None:
    from hfsdk_datasets import check_messages

    tok = make_tokenizer(TOOL_TEMPLATE)
    prompt, response = split_conversation(check_messages(CALLING, "row 0"), "row 0")
    tools = [{"type": "function", "function": {"name": "add", "parameters": {}}}]
    seq = tokenize_supervised(prompt, response, tok, use_template=True, tools=tools)
    assert _words(tok, seq.prompt_ids)[:3] == ["<|system|>", "add", "<|end|>"]  # tools offered
    assert _words(tok, seq.response_ids) == [
        "call", "add", "two", "<|end|>",          # the call: trained
        "<|tool|>", "three", "<|end|>",           # its result: context
        "<|assistant|>",                          # the cue: context
        "three", "<|end|>", "</s>",               # the answer: trained
    ]  # fmt: skip
    assert list(seq.loss_mask) == [1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1]


def test_tool_calls_a_template_or_the_plain_rendering_would_drop_are_refused(
    make_tokenizer,
) -> None:
    from hfsdk_datasets import check_messages

    prompt, response = split_conversation(check_messages(CALLING, "row 4"), "row 4")
    with pytest.raises(HfsdkError, match="row 4: response message 0 calls tools, but the chat"):
        tokenize_supervised(prompt, response, make_tokenizer(), use_template=True, where="row 4")
    with pytest.raises(HfsdkError, match="row 4 has assistant tool calls, which the plain"):
        tokenize_supervised(
            prompt, response, make_tokenizer(None), use_template=False, where="row 4"
        )


def _parallel_calls() -> list[dict]:  # type: ignore[type-arg]
    from hfsdk_datasets import check_messages

    def call(city: str) -> dict:  # type: ignore[type-arg]
        return {"type": "function", "function": {"name": "w", "arguments": {"c": city}}}

    return check_messages(
        [
            {"role": "user", "content": "weather in Paris and Rome?"},
            {"role": "assistant", "content": None, "tool_calls": [call("Paris"), call("Rome")]},
            {"role": "tool", "content": "sunny"},
            {"role": "tool", "content": "rain"},
            {"role": "assistant", "content": "Paris sunny, Rome rain."},
        ],
        "row 0",
    )


@pytest.mark.parametrize("family", ["qwen2.5", "llama3"])
def test_parallel_tool_results_are_one_untrained_segment(family: str) -> None:
    # Qwen's template groups consecutive tool results into one user turn, so the rendering up
    # to the first result is no prefix of the one up to the second. Before: refused.
    from hfsdk_testing.chat_templates import FAMILIES

    tok = FAMILIES[family]()
    conversation = _parallel_calls()
    prompt, response = split_conversation(conversation, "row 0")
    seq = tokenize_supervised(prompt, response, tok, use_template=True, where="row 0")
    whole = tok.apply_chat_template(conversation, tokenize=False)
    text = tok.decode([*seq.prompt_ids, *seq.response_ids])
    assert whole.startswith(text)
    untrained = tok.decode(
        [i for i, m in zip(seq.response_ids, seq.loss_mask, strict=True) if not m]
    )
    assert "sunny" in untrained and "rain" in untrained
    trained = tok.decode([i for i, m in zip(seq.response_ids, seq.loss_mask, strict=True) if m])
    assert "Rome" in trained and trained.endswith("Paris sunny, Rome rain." + tok.eos_token)


def test_the_prefix_error_suggests_the_plain_rendering_only_without_tool_calls(
    make_tokenizer,
) -> None:
    from hfsdk_datasets import check_messages

    odd = "{{ messages|length }} {% for m in messages %}{{ m['content'] }} {% endfor %}"
    with pytest.raises(HfsdkError, match="prefixes") as plain:
        tokenize_supervised("add", "one", make_tokenizer(odd), use_template=True, where="row 1")
    assert "data.apply_chat_template=false" in str(plain.value)
    prompt, response = split_conversation(check_messages(CALLING, "row 4"), "row 4")
    with pytest.raises(HfsdkError, match="prefixes") as calls:
        tokenize_supervised(prompt, response, make_tokenizer(odd), use_template=True, where="row 4")
    assert "apply_chat_template" not in str(calls.value)


THINKING = "<think>\nadd two and two\n</think>\n\nThe answer is 4"


def test_a_template_that_drops_the_reasoning_of_a_trained_turn_is_refused() -> None:
    # Qwen3-style templates that strip <think>...</think> from assistant turns (QwQ, early
    # R1-distill). Before: only "The answer is 4" was trained, without a word.
    from hfsdk_testing.chat_templates import FAMILIES

    with pytest.raises(HfsdkError, match="row 6: the chat template renders assistant") as info:
        tokenize_supervised("What is 2+2?", THINKING, FAMILIES["qwen3"](), use_template=True,
                            where="row 6")  # fmt: skip
    assert "reasoning" in str(info.value) and "\n" not in str(info.value)
    # reasoning_content that the template leaves out is refused the same way.
    reply = [{"role": "assistant", "content": "4", "reasoning_content": "add two and two"}]
    with pytest.raises(HfsdkError, match="reasoning_content"):
        tokenize_supervised("What is 2+2?", reply, FAMILIES["qwen2.5"](), use_template=True)


def test_templates_that_keep_the_reasoning_or_only_trim_whitespace_pass() -> None:
    from hfsdk_testing.chat_templates import FAMILIES

    real = FAMILIES["qwen3-real"]()
    for reply in (THINKING, "<think>add two and two</think>The answer is 4"):
        seq = tokenize_supervised("What is 2+2?", reply, real, use_template=True)
        trained = real.decode(
            [i for i, m in zip(seq.response_ids, seq.loss_mask, strict=True) if m]
        )
        assert "add two and two" in trained and "The answer is 4" in trained
    seq = tokenize_supervised(
        "What is 2+2?",
        [{"role": "assistant", "content": "4", "reasoning_content": "add two and two"}],
        real,
        use_template=True,
    )
    assert "add two and two" in real.decode(seq.response_ids)
    llama = FAMILIES["llama3"]()  # trims each message's content
    seq = tokenize_supervised(" What is 2+2? ", "  It is 4. \n", llama, use_template=True)
    assert llama.decode(seq.response_ids).startswith("It is 4.")
