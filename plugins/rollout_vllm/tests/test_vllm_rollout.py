"""The vLLM rollout against HF ``generate`` on the same weights, before and after updates."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import torch

from hfsdk import GenerationRequest, get_registry
from hfsdk.core.batch import Batch
from hfsdk_backend_common import WeightSyncMismatch

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

OUTPUT_KEYS = ("prompts", "responses", "input_ids", "attention_mask", "position_ids")


def _same_generation(a: Batch, b: Batch) -> None:
    for key in (*OUTPUT_KEYS, "response_mask"):
        assert torch.equal(a[key], b[key]), key
    assert list(a["response_text"]) == list(b["response_text"])


def test_registered() -> None:
    entry = get_registry("rollout_backends")["vllm"]
    assert entry.impl.__name__ == "VLLMRollout"


def test_greedy_equals_hf_greedy(vllm_rollout, hf_rollout, make_prompts, prompt_texts) -> None:
    prompts = make_prompts(prompt_texts)
    ours = vllm_rollout.generate_sequences(prompts, greedy=True)
    theirs = hf_rollout.generate_sequences(prompts, greedy=True)
    _same_generation(ours, theirs)
    assert ours.meta["greedy"] and ours.meta["temperature"] == 1.0
    assert list(ours["uid"]) == list(prompts["uid"])
    # The warm-started model answers and stops: some responses end with EOS before the limit.
    assert (ours["response_mask"].sum(-1) < 8).any()
    mask = ours["response_mask"].bool()
    assert (ours["responses"][~mask] == hf_rollout.tokenizer.pad_token_id).all()


def test_log_probs_match_the_actor(vllm_rollout, actor, make_prompts, prompt_texts) -> None:
    """``rollout_log_probs`` equal the actor's log-probs of the same tokens, also under top_p.

    With synced weights the gap must be float noise: at top_p=0.5 vLLM's processed
    (nucleus-renormalised) log-probs would sit log(kept mass) above the actor's.
    Another temperature takes the processed mode (``test_vllm_config.py``); it is
    not exercised here because a second in-process engine cannot be closed without
    tearing down vLLM's process-wide groups that the shared engine uses.
    """
    import attrs

    prompts = make_prompts(prompt_texts).repeat(4, interleave=True)
    for top_p in (1.0, 0.5):
        vllm_rollout.config = attrs.evolve(vllm_rollout.config, top_p=top_p)
        try:
            batch = vllm_rollout.generate_sequences(prompts)
        finally:
            vllm_rollout.config = attrs.evolve(vllm_rollout.config, top_p=1.0)
        assert batch.meta["temperature"] == 1.0 and not batch.meta["greedy"]
        old = actor.compute_log_prob(batch)["old_log_probs"]
        mask = batch["response_mask"].bool()
        assert torch.allclose(batch["rollout_log_probs"][mask], old[mask], atol=1e-4), top_p
        assert (batch["rollout_log_probs"][~mask] == 0).all()


def test_sampling_settings_and_seeds(vllm_rollout, make_prompts, prompt_texts) -> None:
    import attrs

    prompts = make_prompts(prompt_texts[:2])
    torch.manual_seed(3)
    first = vllm_rollout.generate_sequences(prompts, n=6)
    torch.manual_seed(3)
    again = vllm_rollout.generate_sequences(prompts, n=6)
    assert len(first) == 12 and list(first["uid"]) == ["p0"] * 6 + ["p1"] * 6
    assert torch.equal(first["responses"], again["responses"])  # seeded per request
    assert len({tuple(r.tolist()) for r in first["responses"]}) > 2  # and still random
    # top_k=1 leaves one candidate: sampling becomes greedy.
    greedy = vllm_rollout.generate_sequences(prompts, greedy=True)
    vllm_rollout.config = attrs.evolve(vllm_rollout.config, top_k=1)
    try:
        top1 = vllm_rollout.generate_sequences(prompts)
    finally:
        vllm_rollout.config = attrs.evolve(vllm_rollout.config, top_k=0)
    assert torch.equal(top1["responses"], greedy["responses"])


def test_update_weights_follows_the_actor(
    vllm_rollout, hf_rollout, actor, make_prompts, prompt_texts, helpers
) -> None:
    """After a training step vLLM generates what HF generates with the new weights."""
    prompts = make_prompts(prompt_texts)
    before = vllm_rollout.generate_sequences(prompts, greedy=True)
    saved = actor.state_dict()
    try:
        helpers.train_step(
            actor, vllm_rollout.generate_sequences(prompts.repeat(8, interleave=True))
        )
        # Nothing synced yet: generating from the old weights is refused (a skipped reload).
        with pytest.raises(WeightSyncMismatch, match="a weight reload was skipped"):
            vllm_rollout.generate_sequences(prompts, greedy=True)
        vllm_rollout.update_weights(actor)
        ours = vllm_rollout.generate_sequences(prompts, greedy=True)
        theirs = hf_rollout.generate_sequences(prompts, greedy=True)
        _same_generation(ours, theirs)
        assert not torch.equal(ours["responses"], before["responses"])
    finally:
        actor.load_state_dict(saved)
        vllm_rollout.update_weights(actor)
    restored = vllm_rollout.generate_sequences(prompts, greedy=True)
    assert torch.equal(restored["responses"], before["responses"])


def test_a_reload_is_read_back_from_the_engine_and_a_dropped_tensor_caught(
    vllm_rollout, actor, make_prompts, prompt_texts, helpers, monkeypatch
) -> None:
    """After every reload the engine's weights are read back (through its CPU kernels, which
    keep the linear weights repacked) and compared with what was streamed in: the engine's
    exact bit sums equal the actor's tensors', a reload that lost a tensor
    (``vllm_drop``) raises ``WeightSyncMismatch`` and generating stays refused."""
    from hfsdk_backend_common import bit_sum
    from hfsdk_faults import faults

    prompts = make_prompts(prompt_texts)
    saved = actor.state_dict()
    try:
        helpers.train_step(actor, vllm_rollout.generate_sequences(prompts.repeat(4, True)))
        vllm_rollout.update_weights(actor)
        out = vllm_rollout.generate_sequences(prompts, greedy=True)
        assert out.meta["rollout_metrics"]["sync/verified"] == 1.0
        assert out.meta["rollout_metrics"]["timing/vllm_verify_s"] > 0
        # What the check compares: the engine's fused, padded, kernel-held tensors.
        held = vllm_rollout.engine.held_sums()
        engine_name = vllm_rollout.engine.engine_name()
        expected: dict[str, int] = {}
        for name, tensor in actor.hf_weights():
            key = engine_name(name)
            expected[key] = expected.get(key, 0) + bit_sum(tensor)
        assert "model.layers.0.self_attn.qkv_proj.weight" in expected
        assert {k: held[k] for k in expected} == expected

        helpers.train_step(actor, vllm_rollout.generate_sequences(prompts.repeat(4, True)))
        monkeypatch.setenv(faults.FAULT_ENV, f"vllm_drop:{actor.weights_version}")
        monkeypatch.setattr(faults, "_FIRED", set())
        with pytest.raises(WeightSyncMismatch) as info:
            vllm_rollout.update_weights(actor)
        line = str(info.value)
        assert "\n" not in line and f"weights version {actor.weights_version}" in line
        assert "differ from what was sent" in line, line
        with pytest.raises(WeightSyncMismatch, match="a weight reload was skipped"):
            vllm_rollout.generate_sequences(prompts, greedy=True)
    finally:
        actor.load_state_dict(saved)
        vllm_rollout.update_weights(actor)  # the fault fired once: this reload is whole
    assert vllm_rollout.last_metrics["sync/verified"] == 1.0


def test_a_stale_or_skipped_reload_is_caught_before_the_engine_generates(
    vllm_rollout, actor, make_prompts, prompt_texts, helpers, monkeypatch
) -> None:
    """``vllm_stale``: the reload consumes the stream but the engine keeps its old weights
    (its read-back differs from what was sent: ``WeightSyncMismatch``, one line);
    ``vllm_skip``: the reload never runs (generating is refused by the loaded version).
    Either way nothing is generated from weights the actor no longer holds."""
    from hfsdk_faults import faults

    prompts = make_prompts(prompt_texts)
    request = GenerationRequest(
        prompt_ids=vllm_rollout.tokenizer(prompt_texts[0]).input_ids, max_new_tokens=2, greedy=True
    )
    assert asyncio.run(vllm_rollout.generate_request(request)).token_ids  # the server starts
    saved = actor.state_dict()
    try:
        helpers.train_step(actor, vllm_rollout.generate_sequences(prompts.repeat(4, True)))
        version = actor.weights_version
        monkeypatch.setenv(faults.FAULT_ENV, f"vllm_stale:{version}")
        monkeypatch.setattr(faults, "_FIRED", set())
        with pytest.raises(WeightSyncMismatch) as info:
            vllm_rollout.update_weights(actor)  # stale: every trained tensor differs
        line = str(info.value)
        assert "\n" not in line and f"weights version {version} after reloading" in line
        assert "tensor(s) differ from what was sent" in line, line
        monkeypatch.setenv(faults.FAULT_ENV, f"vllm_skip:{version}")
        vllm_rollout.update_weights(actor)  # skip: returns without reloading
        with pytest.raises(WeightSyncMismatch, match="a weight reload was skipped"):
            vllm_rollout.generate_sequences(prompts, greedy=True)
        # Single requests (multi-turn) are refused too, also on an already started server.
        with pytest.raises(WeightSyncMismatch, match="a weight reload was skipped"):
            asyncio.run(vllm_rollout.generate_request(request))
        vllm_rollout.update_weights(actor)  # both fired once: this reload is whole
        assert vllm_rollout.last_metrics["sync/verified"] == 1.0
        assert asyncio.run(vllm_rollout.generate_request(request)).token_ids
    finally:
        actor.load_state_dict(saved)
        vllm_rollout.update_weights(actor)


@pytest.mark.parametrize("failure", ["stream", "read-back"])
def test_a_failed_reload_forgets_the_loaded_version(failure: str, monkeypatch) -> None:
    """A reload that raises (the weight stream breaks partway, or the read-back finds a
    mismatch) leaves the engine with partly new weights: the rollout no longer claims any
    version, so a later request for the version it held before reloads instead of being
    skipped, and generating meanwhile is refused. No engine: the reload is a stub."""
    from types import SimpleNamespace

    from hfsdk_backend_common import require_loaded
    from hfsdk_rollout_vllm import vllm_rollout as module
    from hfsdk_rollout_vllm.vllm_config import VLLMRolloutConfig

    reloads: list[int] = []

    def reload(engine: object, weights, *, version: int, **_: object) -> dict[str, float]:
        reloads.append(version)
        for _name, _tensor in weights:  # the engine takes each tensor as it arrives
            pass
        if failure == "read-back" and len(reloads) == 1:
            raise WeightSyncMismatch(f"weights version {version}: 1 tensor(s) differ")
        return {}

    def hf_weights():
        yield "a", torch.zeros(2)
        if failure == "stream" and len(reloads) == 1:
            raise RuntimeError("the stream broke after one tensor")
        yield "b", torch.ones(2)

    monkeypatch.setattr(module, "verified_reload", reload)
    rollout = object.__new__(module.VLLMRollout)
    rollout.config = VLLMRolloutConfig()
    rollout.engine = SimpleNamespace(dtype=torch.float32)  # type: ignore[assignment]
    rollout.loaded_version, rollout.weight_updates = 3, 0
    actor = SimpleNamespace(
        weights_version=4,
        hf_weights=hf_weights,
        dp=SimpleNamespace(actor_group=None),
        device=torch.device("cpu"),
        weight_probes={},
    )
    with pytest.raises((RuntimeError, WeightSyncMismatch)):
        rollout.update_weights(actor)
    for version in (3, 4):  # neither the old weights nor the new ones are whole
        with pytest.raises(WeightSyncMismatch, match="a weight reload was skipped"):
            require_loaded(rollout.loaded_version, version, "the vLLM engine")
    actor.weights_version = 3  # the actor went back to the version the engine held
    rollout.update_weights(actor)
    assert reloads == [4, 3]
    assert (rollout.loaded_version, rollout.weight_updates) == (3, 1)


def test_30m_llama_greedy_equals_hf(tmp_path: Path, make_prompts, prompt_texts, helpers) -> None:
    """A ~30M-parameter Llama (random weights, head_dim 64) decodes the same tokens in both.

    A second engine in this process: once it is dropped, vLLM's process-wide groups are
    gone and the shared engine cannot generate any more, so only tests that build their
    own engine may follow."""
    from hfsdk_backend_common.rollout.hf_rollout import HFRollout
    from hfsdk_backend_common.rollout_config import HFRolloutConfig
    from hfsdk_rollout_vllm.vllm_config import VLLMRolloutConfig
    from hfsdk_rollout_vllm.vllm_rollout import VLLMRollout

    model_dir = helpers.build_llama(tmp_path / "llama30m")
    actor = helpers.build_actor(model_dir)
    n_params = sum(p.numel() for p in actor.module.parameters())
    assert 25e6 < n_params < 35e6
    rng = torch.get_rng_state()
    vllm = VLLMRollout(VLLMRolloutConfig(max_response_length=16), actor)
    assert torch.equal(torch.get_rng_state(), rng)  # vLLM's seeding did not leak out
    hf = HFRollout(HFRolloutConfig(max_response_length=16), actor)
    prompts = make_prompts(prompt_texts)
    _same_generation(
        vllm.generate_sequences(prompts, greedy=True), hf.generate_sequences(prompts, greedy=True)
    )
    del vllm


def test_a_lora_actors_merged_weights_reach_the_engine_verified(
    default_model_dir, make_prompts, prompt_texts, helpers, monkeypatch
) -> None:
    """A LoRA actor streams ``W + (alpha/r)·B·A`` into vLLM: the reload is read back and
    verified, each merged weight is checked against the actor's probe of its factors, and
    vLLM's log-probs of what it decoded are peft's merged model's (``merge_and_unload``, an
    independent merge) within float32 noise; ``lora_merge_bad`` fails the reload."""
    import copy

    from hfsdk_backend_common.lora_config import LoraConfig
    from hfsdk_backend_common.rollout.replica import replica_log_probs
    from hfsdk_rollout_vllm.vllm_config import VLLMRolloutConfig
    from hfsdk_rollout_vllm.vllm_rollout import VLLMRollout

    lora = LoraConfig(rank=4, alpha=8.0, target_modules=("q_proj", "v_proj", "down_proj"))
    actor = helpers.build_actor(default_model_dir, lora=lora)
    vllm = VLLMRollout(VLLMRolloutConfig(max_response_length=8), actor)
    prompts = make_prompts(prompt_texts)
    before = vllm.generate_sequences(prompts, greedy=True)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():  # what an update of the adapters does, larger (B starts at 0)
        for name, param in actor.module.named_parameters():
            if "lora_B" in name:
                param.copy_(0.3 * torch.randn(param.shape, generator=generator))
    actor.weights_version += 1
    vllm.update_weights(actor)
    out = vllm.generate_sequences(prompts, greedy=True)
    assert out.meta["rollout_metrics"]["sync/verified"] == 1.0
    # each merged weight, as the engine's loader got it, is its base + scale·B·A
    merges = out.meta["rollout_metrics"]["sync/merges_verified"]
    assert merges == len(actor.weight_probes) > 0
    assert not torch.equal(out["responses"], before["responses"])  # the adapters matter
    merged = copy.deepcopy(actor.module).merge_and_unload().eval()
    mask = out["response_mask"].bool()
    expected = replica_log_probs(merged, out)
    assert torch.allclose(out["rollout_log_probs"][mask], expected[mask], atol=1e-4)

    # A merge that left one module's adapter out: the engine loaded exactly what was sent
    # (the bit sums agree), but it is not the merge, and the reload fails in one line.
    from hfsdk_faults import faults

    actor.weights_version += 1
    monkeypatch.setenv(faults.FAULT_ENV, f"lora_merge_bad:{actor.weights_version}")
    monkeypatch.setattr(faults, "_FIRED", set())
    with pytest.raises(WeightSyncMismatch) as info:
        vllm.update_weights(actor)
    line = str(info.value)
    assert "\n" not in line and f"1 of {merges:.0f} merged weight(s) wrong" in line, line
    assert "tensor(s) differ" not in line  # what was sent arrived; the merge was wrong
    del vllm


def test_a_tied_heads_update_reaches_the_engine(
    tmp_path: Path, make_prompts, prompt_texts, helpers
) -> None:
    """A tied LM head (the input embeddings) samples with the updated weights: vLLM on CPU
    packs the head once at load, and a reload refreshed only heads loaded by their own
    name, so a tied model's rollouts kept its first head (log-probs 7e-3 off the actor's
    after one step, where float32 rounding gives 5e-7)."""
    from hfsdk_rollout_vllm.vllm_config import VLLMRolloutConfig
    from hfsdk_rollout_vllm.vllm_rollout import VLLMRollout

    model_dir = helpers.build_llama(tmp_path / "tied", hidden=64, layers=2, heads=2, tied=True)
    actor = helpers.build_actor(model_dir)
    vllm = VLLMRollout(VLLMRolloutConfig(max_response_length=8), actor)
    prompts = make_prompts(prompt_texts).repeat(4, interleave=True)
    helpers.train_step(actor, vllm.generate_sequences(prompts))
    vllm.update_weights(actor)
    out = vllm.generate_sequences(prompts)
    mask = out["response_mask"].bool()
    trained = actor.compute_log_prob(out)["old_log_probs"]
    gap = (out["rollout_log_probs"] - trained)[mask].abs().max().item()
    assert gap < 1e-4, gap
    del vllm
