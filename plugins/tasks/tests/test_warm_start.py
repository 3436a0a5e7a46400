"""The warm-started default model: reward and cost start mid-range, samples vary."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from hfsdk_tasks import DefaultAssets, default_task_cost, default_task_reward
from hfsdk_tasks.task import task_rows
from hfsdk_tasks.tokenizer import load_tokenizer
from hfsdk_testing import RngForked, record_rng_forks


def test_build_reports_a_policy_with_room_to_learn(default_assets: DefaultAssets) -> None:
    warm = default_assets.build_info["warm_start"]
    assert 0.3 <= warm["expected_reward"] <= 0.5
    assert 0.4 <= warm["filler_probability"] <= 0.6
    assert 200_000 <= default_assets.build_info["num_parameters"] <= 500_000


def test_sampled_responses_score_mid_range_and_vary(default_assets: DefaultAssets) -> None:
    tokenizer = load_tokenizer(default_assets.tokenizer_dir)
    model = AutoModelForCausalLM.from_pretrained(str(default_assets.model_dir)).eval()
    rows = task_rows(default_assets.spec)
    prompts = [r["prompt"] for r in rows] * 4
    answers = [r["answer"] for r in rows] * 4
    inputs = tokenizer(prompts, return_tensors="pt", padding=True)
    width = inputs.input_ids.shape[1]
    torch.manual_seed(0)
    with torch.no_grad():
        sampled = model.generate(**inputs, do_sample=True, top_k=0, top_p=1.0, max_new_tokens=8)
        greedy = model.generate(**inputs, do_sample=False, max_new_tokens=8)
    texts = tokenizer.batch_decode(sampled[:, width:], skip_special_tokens=True)
    rewards = default_task_reward(prompts, texts, answer=answers)
    costs = default_task_cost(prompts, texts)
    assert 0.3 <= sum(rewards) / len(rewards) <= 0.55
    assert 0.3 <= sum(costs) / len(costs) <= 0.7
    assert len(set(texts)) >= 30
    # Reward and cost conflict: responses with the filler word are right more often.
    with_filler = [r for r, c in zip(rewards, costs, strict=True) if c]
    without = [r for r, c in zip(rewards, costs, strict=True) if not c]
    assert sum(with_filler) / len(with_filler) >= sum(without) / len(without) + 0.2
    # The right answer is the policy's most likely one: greedy decoding is (almost) always right.
    greedy_texts = tokenizer.batch_decode(greedy[:, width:], skip_special_tokens=True)
    greedy_rewards = default_task_reward(prompts, greedy_texts, answer=answers)
    assert sum(greedy_rewards) / len(greedy_rewards) >= 0.9
    # Responses are short: the answer (and maybe the filler) then </s>.
    lengths = (sampled[:, width:] != tokenizer.pad_token_id).sum(dim=1).float()
    assert lengths.mean() <= 4


def test_the_seeded_build_restores_the_cuda_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    """``torch.manual_seed`` reseeds CUDA too: the build forks the current CUDA device's
    generator as well as the CPU one, so it leaves both as they were."""
    import types

    from hfsdk_tasks.warm_start import build_warm_started_model

    forked = record_rng_forks(monkeypatch)
    with pytest.raises(RngForked):
        build_warm_started_model(types.SimpleNamespace(seed=3), None)  # type: ignore[arg-type]
    assert forked == [[0]]
