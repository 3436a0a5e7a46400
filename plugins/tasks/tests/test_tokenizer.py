"""The locally trained word-level tokenizer of the default task."""

from __future__ import annotations

from pathlib import Path

from hfsdk_tasks import DefaultTaskSpec
from hfsdk_tasks.tokenizer import SPECIAL_TOKENS, load_tokenizer, train_tokenizer


def test_prompt_gets_bos_and_numbers_are_single_tokens() -> None:
    tokenizer = train_tokenizer(DefaultTaskSpec())
    ids = tokenizer("3 + 15 =").input_ids
    assert ids[0] == tokenizer.bos_token_id
    assert tokenizer.convert_ids_to_tokens(ids[1:]) == ["3", "+", "15", "="]
    assert tokenizer.unk_token_id not in ids
    # Every answer 0..18 and the filler word is one known token.
    for word in [*map(str, range(19)), "ugh"]:
        assert tokenizer.convert_tokens_to_ids(word) != tokenizer.unk_token_id
    assert len(tokenizer) == len(SPECIAL_TOKENS) + 19 + 3  # numbers, '+', '=', 'ugh'


def test_decode_skips_special_tokens_and_joins_words() -> None:
    tokenizer = train_tokenizer(DefaultTaskSpec())
    ids = [tokenizer.convert_tokens_to_ids(t) for t in ("ugh", "12")]
    ids += [tokenizer.eos_token_id, tokenizer.pad_token_id]
    assert tokenizer.decode(ids, skip_special_tokens=True) == "ugh 12"


def test_round_trip_through_a_directory(tmp_path: Path) -> None:
    tokenizer = train_tokenizer(DefaultTaskSpec())
    tokenizer.save_pretrained(str(tmp_path))
    loaded = load_tokenizer(tmp_path)
    texts = ["0 + 0 =", "9 + 9 = ugh 18"]
    assert loaded(texts).input_ids == tokenizer(texts).input_ids
    assert loaded.padding_side == "left"
    assert (loaded.pad_token_id, loaded.eos_token_id) == (
        tokenizer.pad_token_id,
        tokenizer.eos_token_id,
    )
    assert loaded.pad_token_id != loaded.eos_token_id
    batch = loaded(["1 + 1 =", "9 + 9 = 18"], padding=True, return_tensors="pt")
    assert batch.input_ids[0, 0].item() == loaded.pad_token_id  # left padding
    assert batch.attention_mask[0].tolist() == [0, 1, 1, 1, 1, 1]


def test_training_is_deterministic() -> None:
    assert (
        train_tokenizer(DefaultTaskSpec()).get_vocab()
        == train_tokenizer(DefaultTaskSpec()).get_vocab()
    )
