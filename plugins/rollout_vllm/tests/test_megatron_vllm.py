"""vLLM fed by the megatron actor through the 3D-HybridEngine's generation shards.

Two gloo ranks train at tp=2 and generate at rollout tp=2: one vLLM engine
split over both ranks (tensor parallel inside the actor's gloo world). Greedy
responses equal HF ``generate`` on the same weights; after an
``update_actor`` step the engine keeps the old weights until it is told they
changed, then equals HF with the new weights. The end-to-end run (Ray) uses
rollout tp=1: two micro-DP replicas, one whole-model vLLM engine per rank,
fed by the micro-DP transition.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

from hfsdk_backend_common.testing.launch import run_gloo
from hfsdk_testing import hf_greedy_responses, save_tiny_llama

# Heavy: megatron beside vLLM repeats, on another actor, what the fsdp + vLLM tests check quick.
pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"), pytest.mark.heavy]

HERE = str(Path(__file__).parent)
PROMPTS = ["3 + 5 =", "1 + 2 + 3 =", "9 + 9 =", "4 + 0 ="]
WIDTH = 6
TG = 2
IN_SYNC = 1e-4
"""Largest |vLLM − actor| log-prob of a sampled token when both hold the same weights."""


def _save_model(directory: Path, tokenizer_dir: Path) -> Path:
    """A tiny Llama vLLM's CPU kernels take (head_dim 32), 2 heads for tp=2, odd vocabulary.

    The vocabulary has 101 rows beyond the tokenizer's, so both of vLLM's
    vocabulary shards (64 rows each at tp=2) hold real rows.
    """
    from transformers import PreTrainedTokenizerFast

    return save_tiny_llama(
        directory,
        PreTrainedTokenizerFast.from_pretrained(str(tokenizer_dir)),
        hidden_size=64,
        intermediate_size=128,
        num_heads=2,
        num_kv_heads=2,
        extra_vocab=101,  # odd: megatron pads it to a multiple of tp
        init_std=0.2,  # peaked logits: greedy outputs differ from prompt to prompt
    )


def _hf_greedy(model: Any, prompts: dict, eos: int, pad: int) -> list[list[int]]:
    ids, mask = prompts["input_ids"], prompts["attention_mask"]
    return hf_greedy_responses(model, ids, mask, width=WIDTH, eos=eos, pad=pad).tolist()


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, default_model_dir: Path) -> dict[str, Any]:
    from transformers import PreTrainedTokenizerFast

    path = _save_model(tmp_path_factory.mktemp("megatron-vllm") / "model", default_model_dir)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(path))
    tokenizer.padding_side = "left"
    encoded = tokenizer(PROMPTS, return_tensors="pt", padding=True)
    prompts = {"input_ids": encoded.input_ids, "attention_mask": encoded.attention_mask}
    kwargs = {"path": str(path), "prompts": prompts, "tgs": [TG], "width": WIDTH}
    outcomes = run_gloo(2, "megatron_vllm_worker:run", kwargs, path=[HERE], timeout=600)
    return {"path": path, "prompts": prompts, "outcomes": outcomes, "tokenizer": tokenizer}


@pytest.mark.distributed
def test_greedy_equals_hf_before_and_after_update_actor(run: dict[str, Any]) -> None:
    from transformers import AutoModelForCausalLM

    tok = run["tokenizer"]
    eos, pad = tok.eos_token_id, tok.pad_token_id
    model = AutoModelForCausalLM.from_pretrained(str(run["path"])).eval()
    before = _hf_greedy(model, run["prompts"], eos, pad)
    state = next(o[TG]["state"] for o in run["outcomes"] if o[TG]["state"] is not None)
    model.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()}, strict=False)
    after = _hf_greedy(model, run["prompts"], eos, pad)
    assert after != before, "the update did not change greedy output"
    for outcome in run["outcomes"]:  # both generation replicas return the whole batch
        got = outcome[TG]
        assert got["first"] == before
        assert "a weight reload was skipped" in got["stale"]  # not told about the update
        assert got["second"] == after
        assert got["weight_updates"] == 1
        assert got["gap"] < IN_SYNC  # rollout_log_probs are the actor's log-probs


@pytest.mark.distributed
def test_reload_reports_the_transition(run: dict[str, Any]) -> None:
    for outcome in run["outcomes"]:
        fresh, reload = outcome[TG]["fresh_metrics"], outcome[TG]["reload_metrics"]
        assert fresh["timing/reshard_s"] == 0.0  # the engine started from the same weights
        # tp=2 -> tg=2: the generation shard is the training shard (no micro-DP bytes);
        # vLLM's loaders take whole weights, gathered one at a time over the 2 ranks.
        assert reload["perf/reshard_bytes"] == 0.0 and reload["timing/reshard_s"] > 0
        assert reload["perf/reshard_tp_gather_bytes"] > 0
        # One weight in flight (gathered pieces + the whole weight), not the model.
        assert 0 < reload["perf/reshard_peak_extra_bytes"] < reload["perf/reshard_tp_gather_bytes"]


@pytest.mark.distributed
def test_each_ranks_slices_are_read_back_after_the_reload(run: dict[str, Any]) -> None:
    """Generation tp=2: each rank's engine holds its vLLM slices; after the reload each
    rank reads them back against the slices of the stream it loaded, and verifies."""
    for outcome in run["outcomes"]:
        assert "sync/verified" not in outcome[TG]["fresh_metrics"]  # no reload yet
        assert outcome[TG]["reload_metrics"]["sync/verified"] == 1.0
        assert outcome[TG]["reload_metrics"]["timing/vllm_verify_s"] > 0


@pytest.mark.heavy
@pytest.mark.distributed
def test_a_slice_dropped_on_one_rank_fails_every_rank(
    tmp_path: Path, default_model_dir: Path
) -> None:
    """``vllm_drop:1`` at generation tp=2: the last rank's reload of version 1 loses its
    slice of one tensor; that rank's read-back names it, the other rank, whose own
    slices are right, stops too (the verdict is agreed)."""
    from transformers import PreTrainedTokenizerFast

    path = _save_model(tmp_path / "model", default_model_dir)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(path))
    tokenizer.padding_side = "left"
    encoded = tokenizer(PROMPTS, return_tensors="pt", padding=True)
    prompts = {"input_ids": encoded.input_ids, "attention_mask": encoded.attention_mask}
    kwargs = {"path": str(path), "prompts": prompts, "tgs": [TG], "width": WIDTH}
    kwargs["fault"] = "vllm_drop:1"
    first, last = (
        o[TG]["raised"]
        for o in run_gloo(2, "megatron_vllm_worker:run", kwargs, path=[HERE], timeout=600)
    )
    # The first tensor the last rank gets a slice of: its vocabulary shard of the embedding.
    assert last is not None and last.startswith(
        "the vLLM engine does not hold the actor's weights version 1 after reloading them: 1 of "
    )
    assert (
        "1 of 15 tensor(s) differ from what was sent (first: 'model.embed_tokens.weight')" in last
    )
    assert first is not None and first.startswith(
        "the vLLM engine of another actor rank does not hold the actor's weights version 1"
    )


GRPO = [
    "rollout.backend=vllm",
    "actor.backend=megatron",
    "actor.parallel.tp=2",
    "actor.rollout_layout.tp=1",
    "reference.backend=megatron",
    "reference.parallel.tp=2",
    "placement.pools.global.devices=2",
    "data.batch_size=4",
    "algorithm.n_samples_per_prompt=4",
    "actor.mini_batch_size=8",  # two updates a step: old log-probs are computed and compared
    "actor.micro_batch_size=8",
    "trainer.total_steps=2",
    "trainer.save_every=1",
    "trainer.val_every=0",
]
COMPARED = ("reward/mean", "response_length/mean", "actor/pg_loss", "rollout/log_prob_diff_max")


@pytest.mark.heavy
@pytest.mark.slow
@pytest.mark.distributed
def test_grpo_with_micro_dp_vllm_runs_in_sync_and_resumes_exactly(tmp_path: Path) -> None:
    """GRPO, megatron actor at tp=2, a vLLM engine per rank (rollout tp=1); resume from step 1."""
    from hfsdk import default_task_assets
    from hfsdk.core.config import load_run_config
    from hfsdk.core.trainer.trainer import Trainer

    model = default_task_assets().model_dir  # 4 heads of 32: tp=2 splits them
    overrides = [f"actor.model_path={model}", *GRPO]
    straight_dir, resumed_dir = tmp_path / "straight", tmp_path / "resumed"
    straight = Trainer(load_run_config("grpo", None, overrides), straight_dir, quiet=True).fit()
    assert [r["step"] for r in straight] == [1, 2]
    # vLLM sampled with the actor's weights at every step: the update reached the engine.
    assert max(r["rollout/log_prob_diff_max"] for r in straight) < IN_SYNC
    # Step 2 reloads: each rank receives the other rank's half of the weights.
    assert straight[0]["perf/reshard_bytes"] == 0 and straight[1]["perf/reshard_bytes"] > 0

    shutil.copytree(straight_dir, resumed_dir)
    shutil.rmtree(resumed_dir / "checkpoints" / "step_2")
    resumed = Trainer(load_run_config("grpo", None, overrides), resumed_dir, quiet=True).fit()
    assert [r["step"] for r in resumed] == [1, 2]
    for a, b in zip(straight[1:], resumed[1:], strict=True):
        for key in COMPARED:
            assert a[key] == pytest.approx(b[key], rel=1e-5, abs=1e-6), (a["step"], key)


@pytest.mark.heavy
@pytest.mark.distributed
def test_a_whole_engine_per_rank_is_read_back_after_the_transition(
    tmp_path: Path, default_model_dir: Path
) -> None:
    """Rollout tp=1 under training tp=2: each rank's whole-model engine, fed by the micro-DP
    transition, is read back after the reload and verified on both ranks (the ranks agree
    on the verdict), and then decodes what HF does with the new weights."""
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

    path = _save_model(tmp_path / "model", default_model_dir)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(path))
    tokenizer.padding_side = "left"
    encoded = tokenizer(PROMPTS, return_tensors="pt", padding=True)
    prompts = {"input_ids": encoded.input_ids, "attention_mask": encoded.attention_mask}
    kwargs = {"path": str(path), "prompts": prompts, "tgs": [1], "width": WIDTH}
    outcomes = run_gloo(2, "megatron_vllm_worker:run", kwargs, path=[HERE], timeout=600)
    for outcome in outcomes:
        assert "sync/verified" not in outcome[1]["fresh_metrics"]  # no reload yet
        assert outcome[1]["reload_metrics"]["sync/verified"] == 1.0
        assert outcome[1]["reload_metrics"]["timing/vllm_verify_s"] > 0
    model = AutoModelForCausalLM.from_pretrained(str(path)).eval()
    state = next(o[1]["state"] for o in outcomes if o[1]["state"] is not None)
    model.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()}, strict=False)
    after = _hf_greedy(model, prompts, tokenizer.eos_token_id, tokenizer.pad_token_id)
    assert all(o[1]["second"] == after for o in outcomes)  # each returns the whole batch
