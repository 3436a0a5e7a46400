"""Under ``rollout.decoder=transformers`` the model directory's generation_config.json sampling
defaults (``repetition_penalty``, ``no_repeat_ngram_size``) never apply: ``generate`` samples
with hfsdk's settings only, as the hfsdk decoder and the training log-probs do."""

from __future__ import annotations

import json
import shutil
from typing import Any

import pytest
import torch

from hfsdk import Batch, DataParallelInfo
from hfsdk_backend_common.rollout.hf_rollout import HFRollout
from hfsdk_backend_common.rollout.replica import ReplicaSource
from hfsdk_backend_common.rollout_config import HFRolloutConfig

WIDTH = 12
PENALTIES = {"repetition_penalty": 50.0, "no_repeat_ngram_size": 1}


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A peaked tiny Llama twice: as saved, and with penalties in its generation_config.json."""
    from hfsdk import default_task_assets, load_tokenizer
    from hfsdk_testing import save_tiny_llama

    tokenizer = load_tokenizer(default_task_assets().model_dir)
    root = tmp_path_factory.mktemp("model_defaults")
    plain = save_tiny_llama(
        root / "plain", tokenizer, hidden_size=32, intermediate_size=64, num_heads=2,
        num_kv_heads=2, init_std=0.2, seed=0,
    )  # fmt: skip
    penalized = root / "penalized"
    shutil.copytree(plain, penalized)
    path = penalized / "generation_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **PENALTIES}))
    return {"plain": str(plain), "penalized": str(penalized)}


def _rollout(model_dir: str, decoder: str) -> HFRollout:
    source = ReplicaSource(
        model_dir, model_dir, device=torch.device("cpu"), dtype=torch.float32,
        dp=DataParallelInfo(),
    )  # fmt: skip
    return HFRollout(HFRolloutConfig(max_response_length=WIDTH, decoder=decoder), source)


def _prompts(rollout: HFRollout) -> Batch:
    encoded = rollout.tokenizer(
        ["3 + 5 =", "1 + 2 + 3 =", "9 + 9 ="], return_tensors="pt", padding=True,
        padding_side="left",
    )  # fmt: skip
    return Batch.from_dict(
        tensors={"input_ids": encoded.input_ids, "attention_mask": encoded.attention_mask}
    )


def _repeats_a_token(responses: torch.Tensor) -> bool:
    return any(len(set(row)) < len(row) for row in responses.tolist())


def test_greedy_transformers_decoding_ignores_the_model_dirs_penalties(
    model_dirs: dict[str, str],
) -> None:
    ours = _rollout(model_dirs["penalized"], "hfsdk")
    theirs = _rollout(model_dirs["penalized"], "transformers")
    assert ours.uses_hfsdk_decoder and not theirs.uses_hfsdk_decoder
    prompts = _prompts(ours)
    expected = ours.generate_sequences(prompts, n=1, greedy=True)["responses"]
    # The case where no_repeat_ngram_size=1 would change the tokens: greedy repeats one.
    assert _repeats_a_token(expected)
    got = theirs.generate_sequences(prompts, n=1, greedy=True)["responses"]
    assert torch.equal(got, expected)


def test_sampling_with_the_transformers_decoder_ignores_the_model_dirs_penalties(
    model_dirs: dict[str, str],
) -> None:
    plain = _rollout(model_dirs["plain"], "transformers")
    penalized = _rollout(model_dirs["penalized"], "transformers")
    prompts = _prompts(plain)
    drawn: list[torch.Tensor] = []
    for rollout in (plain, penalized):
        torch.manual_seed(7)
        drawn.append(rollout.generate_sequences(prompts, n=2, greedy=False)["responses"])
    assert torch.equal(drawn[0], drawn[1])


def test_the_modules_generation_config_is_restored_after_generate(
    model_dirs: dict[str, str],
) -> None:
    rollout = _rollout(model_dirs["penalized"], "transformers")
    module: Any = rollout.actor.module  # type: ignore[attr-defined]
    own = module.generation_config
    rollout.generate_sequences(_prompts(rollout), n=1, greedy=True)
    assert module.generation_config is own
    assert own.repetition_penalty == PENALTIES["repetition_penalty"]
    assert own.no_repeat_ngram_size == PENALTIES["no_repeat_ngram_size"]
