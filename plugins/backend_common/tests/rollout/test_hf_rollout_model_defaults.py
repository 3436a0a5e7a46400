"""Under ``rollout.decoder=transformers`` the model directory's generation_config.json sampling
defaults (``repetition_penalty``, ``no_repeat_ngram_size``) never apply: ``generate`` samples
with hfsdk's settings only, as the hfsdk decoder and the training log-probs do.

Also the ``hf`` rollout's request server: it refuses a request longer than the model's
positions alone, and never serves weights older than the actor's."""

from __future__ import annotations

import asyncio
import json
import shutil
from typing import Any

import pytest
import torch

from hfsdk import Batch, DataParallelInfo, GenerationRequest, HfsdkError
from hfsdk_backend_common.rollout.hf_rollout import HFRollout
from hfsdk_backend_common.rollout.replica import ReplicaSource
from hfsdk_backend_common.rollout_config import HFRolloutConfig
from hfsdk_backend_common.weight_check import WeightSyncMismatch

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


def _request(rollout: HFRollout, max_new_tokens: int = 8) -> GenerationRequest:
    prompt = rollout.tokenizer("3 + 5 =")["input_ids"]
    return GenerationRequest(prompt_ids=prompt, max_new_tokens=max_new_tokens, greedy=True)


def test_a_request_beyond_the_models_positions_is_refused_alone(
    model_dirs: dict[str, str],
) -> None:
    rollout = _rollout(model_dirs["plain"], "hfsdk")
    limit = rollout.actor.hf_config.max_position_embeddings
    request = _request(rollout)
    too_long = _request(rollout, limit - len(request.prompt_ids) + 1)
    with pytest.raises(HfsdkError, match=rf"positions but the model holds at most {limit} "):
        asyncio.run(rollout.generate_request(too_long))
    assert len(asyncio.run(rollout.generate_request(request)).token_ids) >= 1
    rollout.close()


def _flip_the_actors_weights_in_place(rollout: HFRollout) -> None:
    """An actor update: new weights in the same tensors, the version bumped."""
    actor: Any = rollout.actor
    with torch.no_grad():
        for param in actor.module.parameters():
            param.mul_(-1.0)
    actor.weights_version += 1


def test_the_lazy_request_server_reopens_on_the_actors_new_weights(
    model_dirs: dict[str, str],
) -> None:
    # It kept the old server, part views of the actor's (updated) tensors and part fused
    # copies of the old ones: it decoded with half-old, half-new weights.
    rollout = _rollout(model_dirs["plain"], "hfsdk")
    request = _request(rollout)
    before = asyncio.run(rollout.generate_request(request)).token_ids
    _flip_the_actors_weights_in_place(rollout)
    served = asyncio.run(rollout.generate_request(request)).token_ids
    fresh = _rollout(model_dirs["plain"], "hfsdk")
    _flip_the_actors_weights_in_place(fresh)
    expected = asyncio.run(fresh.generate_request(request)).token_ids
    assert expected != before  # the update changes the tokens
    assert served == expected
    rollout.close()
    fresh.close()


def test_serving_refuses_requests_once_the_actor_moved_on(model_dirs: dict[str, str]) -> None:
    # Inside serving() the server holds the weights of the whole run (gathered collectively):
    # a request after an update without update_weights is refused, not served stale.
    rollout = _rollout(model_dirs["plain"], "hfsdk")
    with rollout.serving():
        asyncio.run(rollout.generate_request(_request(rollout)))
        _flip_the_actors_weights_in_place(rollout)
        with pytest.raises(WeightSyncMismatch, match="version 0 but the actor is at version 1"):
            asyncio.run(rollout.generate_request(_request(rollout)))


def test_an_open_request_server_leaves_the_callers_grad_mode_alone(
    model_dirs: dict[str, str],
) -> None:
    # The live module's context holds no_grad; the lazily opened server kept it open across
    # calls, so an update between two requests ran without gradients, and two servers closed
    # out of order left gradients off for good.
    first, second = (_rollout(model_dirs["plain"], "hfsdk") for _ in range(2))
    for rollout in (first, second):
        asyncio.run(rollout.generate_request(_request(rollout)))
        assert torch.is_grad_enabled()
    first.close()
    second.close()
    assert torch.is_grad_enabled()
