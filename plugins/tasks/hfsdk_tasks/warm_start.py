"""Build the tiny Llama model and warm-start it with a short supervised pass.

The supervised pass fits the model to a *target policy* given as a
distribution per response position (soft labels; the expectation of
fine-tuning on labels sampled from it, without the sampling noise):

- first response token: the filler word with probability ``p_filler``, else
  a number: the right sum with probability ``p_correct``, otherwise uniform
  over all answers;
- after the filler word: a number, right with probability ``p_correct_after_filler``;
- after the number: ``</s>``.

So the warm-started policy knows the format and puts a clear but minority
share of its mass on the right answer, and sampled responses vary: a short RL
run has both the signal and the room to improve. The filler path being more
often right makes reward and cost pull in opposite directions.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import attrs

from hfsdk_tasks.spec import DefaultTaskSpec
from hfsdk_tasks.task import format_prompt

if TYPE_CHECKING:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast


@attrs.frozen(kw_only=True)
class WarmStartReport:
    """What the warm start reached, measured exactly from the model's probabilities.

    ``expected_reward``: probability that the response starts with the right
    number or with the filler word followed by it (the main ways to score).
    ``filler_probability``: probability that the response starts with the filler word.
    """

    steps: int
    final_loss: float
    expected_reward: float
    filler_probability: float
    seconds: float


def build_model_config(spec: DefaultTaskSpec, tokenizer: PreTrainedTokenizerFast) -> LlamaConfig:
    """The Llama config of the default model (vocabulary and special ids from ``tokenizer``)."""
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_heads,
        max_position_embeddings=spec.max_position_embeddings,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        # Untied embeddings keep FSDP sharding and HF export free of shared parameters.
        tie_word_embeddings=False,
    )


@attrs.frozen(kw_only=True)
class _Targets:
    input_ids: torch.Tensor  # (N, L): "<s> a + b = filler s </s>"
    targets: torch.Tensor  # (N, L, V): target distribution of the next token
    weights: torch.Tensor  # (N, L): 1 where a target is trained
    answer_ids: torch.Tensor  # (N,): token id of the right answer
    first_position: int  # index whose next token is the first response token


def _answer_mixture(
    vocab: int, number_ids: torch.Tensor, answer_id: int, p_correct: float
) -> torch.Tensor:
    """``p_correct`` on the answer plus ``1 − p_correct`` spread over every number."""
    import torch

    mix = torch.zeros(vocab)
    mix[number_ids] = (1.0 - p_correct) / len(number_ids)
    mix[answer_id] += p_correct
    return mix


def _targets(spec: DefaultTaskSpec, tokenizer: PreTrainedTokenizerFast) -> _Targets:
    import torch

    vocab = len(tokenizer)
    number_ids = torch.tensor(
        tokenizer.convert_tokens_to_ids([str(n) for n in range(spec.max_answer + 1)])
    )
    filler_id = tokenizer.convert_tokens_to_ids(spec.filler_word)
    eos = torch.zeros(vocab)
    eos[tokenizer.eos_token_id] = 1.0
    rows, targets, answers = [], [], []
    first_position = -1
    for a in range(spec.max_operand + 1):
        for b in range(spec.max_operand + 1):
            prompt_ids = tokenizer(format_prompt(a, b)).input_ids
            answer_id = int(number_ids[a + b])
            ids = [*prompt_ids, filler_id, answer_id, tokenizer.eos_token_id]
            mix = _answer_mixture(vocab, number_ids, answer_id, spec.p_correct)
            after_filler = _answer_mixture(
                vocab, number_ids, answer_id, spec.p_correct_after_filler
            )
            first = mix * (1.0 - spec.p_filler)
            first[filler_id] += spec.p_filler
            target = torch.zeros(len(ids), vocab)
            first_position = len(prompt_ids) - 1
            target[first_position] = first
            target[first_position + 1] = after_filler
            target[first_position + 2] = eos
            rows.append(ids)
            targets.append(target)
            answers.append(answer_id)
    weights = torch.zeros(len(rows), len(rows[0]))
    weights[:, first_position : first_position + 3] = 1.0
    return _Targets(
        input_ids=torch.tensor(rows),
        targets=torch.stack(targets),
        weights=weights,
        answer_ids=torch.tensor(answers),
        first_position=first_position,
    )


def _measure(model: LlamaForCausalLM, data: _Targets, filler_id: int) -> tuple[float, float]:
    import torch

    with torch.no_grad():
        probs = torch.softmax(model(input_ids=data.input_ids).logits, dim=-1)
    first = probs[:, data.first_position]
    after_filler = probs[:, data.first_position + 1]
    answers = data.answer_ids[:, None]
    p_filler = first[:, filler_id]
    reward = first.gather(1, answers)[:, 0] + p_filler * after_filler.gather(1, answers)[:, 0]
    return float(reward.mean()), float(p_filler.mean())


def build_warm_started_model(
    spec: DefaultTaskSpec, tokenizer: PreTrainedTokenizerFast
) -> tuple[LlamaForCausalLM, WarmStartReport]:
    """A freshly initialised tiny Llama fitted to the target policy (see the module docstring)."""
    import torch
    from transformers import LlamaForCausalLM

    from hfsdk import seeded_rng

    started = time.perf_counter()
    threads = torch.get_num_threads()
    # One thread is as fast as two for a model this small and is not slowed by a busy machine.
    torch.set_num_threads(1)
    try:
        with seeded_rng(spec.seed):
            model = LlamaForCausalLM(build_model_config(spec, tokenizer))
            data = _targets(spec, tokenizer)
            optimizer = torch.optim.AdamW(
                model.parameters(), lr=spec.warm_start_lr, betas=(0.9, 0.95), weight_decay=0.0
            )
            model.train()
            loss = torch.zeros(())
            for _ in range(spec.warm_start_steps):
                log_probs = torch.log_softmax(model(input_ids=data.input_ids).logits, dim=-1)
                per_token = -(data.targets * log_probs).sum(dim=-1)
                loss = (per_token * data.weights).sum() / data.weights.sum()
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
            model.eval()
            filler_id = tokenizer.convert_tokens_to_ids(spec.filler_word)
            reward, p_filler = _measure(model, data, filler_id)
    finally:
        torch.set_num_threads(threads)
    report = WarmStartReport(
        steps=spec.warm_start_steps,
        final_loss=float(loss.detach()),
        expected_reward=reward,
        filler_probability=p_filler,
        seconds=time.perf_counter() - started,
    )
    return model, report
