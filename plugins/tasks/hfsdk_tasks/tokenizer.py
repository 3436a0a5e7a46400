"""A word-level tokenizer trained locally on the default task's text.

Every number of the task is one token, so answers are one token long and a
response is ``[filler] answer </s>``. Prompts get a ``<s>`` in front, like
Llama tokenizers. Saved as a ``PreTrainedTokenizerFast`` directory; load it
with ``PreTrainedTokenizerFast.from_pretrained`` (never guess with AutoTokenizer).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from hfsdk_tasks.spec import DefaultTaskSpec
from hfsdk_tasks.task import format_prompt

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

PAD_TOKEN = "<pad>"
BOS_TOKEN = "<s>"
EOS_TOKEN = "</s>"
UNK_TOKEN = "<unk>"
SPECIAL_TOKENS = (PAD_TOKEN, BOS_TOKEN, EOS_TOKEN, UNK_TOKEN)


def training_corpus(spec: DefaultTaskSpec) -> list[str]:
    """Every prompt with its answer, with and without the filler word."""
    lines = []
    for a in range(spec.max_operand + 1):
        for b in range(spec.max_operand + 1):
            lines.append(f"{format_prompt(a, b)} {a + b}")
            lines.append(f"{format_prompt(a, b)} {spec.filler_word} {a + b}")
    return lines


def train_tokenizer(spec: DefaultTaskSpec) -> PreTrainedTokenizerFast:
    """Train the word-level tokenizer on :func:`training_corpus` (deterministic)."""
    return word_level_tokenizer(
        training_corpus(spec), max_length=spec.max_position_embeddings, cleanup=True
    )


def word_level_tokenizer(
    corpus: list[str], *, max_length: int, cleanup: bool
) -> PreTrainedTokenizerFast:
    """A word-level tokenizer trained on ``corpus``: one token per whitespace-split word,
    ``<s>`` before each prompt, left padding. Decoding joins words with single spaces
    (``cleanup``: and applies the WordPiece decoder's punctuation clean-up)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.WordLevel(unk_token=UNK_TOKEN))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    trainer = trainers.WordLevelTrainer(special_tokens=list(SPECIAL_TOKENS), min_frequency=1)
    tokenizer.train_from_iterator(corpus, trainer)
    bos_id = tokenizer.token_to_id(BOS_TOKEN)
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{BOS_TOKEN} $A", pair=f"{BOS_TOKEN} $A $B", special_tokens=[(BOS_TOKEN, bos_id)]
    )
    tokenizer.decoder = decoders.WordPiece(cleanup=cleanup)
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=BOS_TOKEN,
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        unk_token=UNK_TOKEN,
        padding_side="left",
        model_max_length=max_length,
    )


def load_tokenizer(path: str | Path) -> PreTrainedTokenizerFast:
    """Load a tokenizer directory saved by :func:`train_tokenizer`'s result (through hfsdk's
    one loader, :func:`hfsdk.load_tokenizer`)."""
    from hfsdk import load_tokenizer as load

    return load(path)
