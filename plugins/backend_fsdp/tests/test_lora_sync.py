"""A LoRA actor's weight sync: what the rollout receives is peft's own merged model.

The merge arithmetic (``W + (alpha/r)·B·A``, transposed for GPT-2's ``Conv1D``) is checked
against peft's ``merge_and_unload`` — an independent implementation — through the path a
rollout pool takes: the actor's ``hf_weights`` broadcast over the sync group with their
manifest, received and verified into a plain HF model, whose logits must then equal the
merged model's. The same sync with a tensor dropped fails verification, and so does one
whose merge left a module's adapter out (each merged weight, as the receiver holds it, is
checked against the probe the actor took of its base weight and factors). The colocated
``hf`` rollout checks the merged weights it fills its generation module with the same way.
"""

from __future__ import annotations

import copy
import threading
from pathlib import Path
from typing import Any

import pytest
import torch

from hfsdk import load_tokenizer
from hfsdk_backend_common.lora_config import LoraConfig
from hfsdk_backend_common.weight_sync import (
    WeightSyncGroup,
    open_store,
    receive_weights,
    send_weights,
)
from hfsdk_backend_fsdp.actor import ActorEngine
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig

IDS = torch.tensor([[1, 5, 9, 3, 7, 2, 4, 6], [2, 2, 8, 1, 3, 5, 9, 7]])
TARGETS = {
    "llama": ("q_proj", "v_proj", "down_proj"),
    # attn.c_proj is square (32, 32): a merge that forgot the transpose would still load
    "gpt2": ("c_attn", "attn.c_proj", "c_fc"),
}


def _gpt2_dir(directory: Path, tokenizer_dir: Path) -> Path:
    from transformers import GPT2Config, GPT2LMHeadModel

    tokenizer = load_tokenizer(tokenizer_dir)
    config = GPT2Config(
        vocab_size=len(tokenizer), n_positions=32, n_embd=32, n_layer=2, n_head=2,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
    )  # fmt: skip
    torch.manual_seed(0)
    GPT2LMHeadModel(config).save_pretrained(str(directory))
    tokenizer.save_pretrained(str(directory))
    return directory


def _lora_actor(model_dir: Path, arch: str) -> ActorEngine:
    lora = LoraConfig(rank=4, alpha=8.0, target_modules=TARGETS[arch])
    config = FSDPRoleConfig(model_path=str(model_dir), lora=lora)
    actor = ActorEngine(config, role="actor")
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():  # B starts at 0: give the adapters a large, known effect
        for name, param in actor.module.named_parameters():
            if "lora_B" in name:
                param.copy_(0.5 * torch.randn(param.shape, generator=generator))
    return actor


def _sync(actor: ActorEngine, receiver: torch.nn.Module, drop: str | None = None) -> dict:
    store, endpoint = open_store("127.0.0.1", world_size=2, timeout_s=60)
    results: dict[str, Any] = {}

    def receive() -> None:
        group = WeightSyncGroup(endpoint, 1, timeout_s=60)
        results["received"] = receive_weights(group, dict(receiver.named_parameters()))

    thread = threading.Thread(target=receive)
    thread.start()
    group = WeightSyncGroup(endpoint, 0, store=store, timeout_s=60)
    send_weights(
        group, actor.hf_weights(), bucket_bytes=4096, version=1, fault=drop,
        probes=lambda: actor.weight_probes,
    )  # fmt: skip
    thread.join(timeout=60)
    assert not thread.is_alive()
    return results["received"]


def _logits(model: torch.nn.Module) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=IDS).logits


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_a_lora_sync_gives_the_rollout_pefts_merged_model_and_is_verified(
    arch: str, model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from transformers import AutoModelForCausalLM

    directory = model_dir if arch == "llama" else _gpt2_dir(tmp_path / "gpt2", model_dir)
    actor = _lora_actor(directory, arch)
    if arch == "gpt2":  # peft's fan_in_fan_out layers: the transposed merge is exercised
        from hfsdk_backend_fsdp.lora import fan_in_fan_out_modules

        assert len(fan_in_fan_out_modules(actor.module)) == 3 * 2
    merged = copy.deepcopy(actor.module).merge_and_unload().eval()  # peft's own arithmetic
    rollout = AutoModelForCausalLM.from_pretrained(str(directory)).eval()  # the base weights
    base = _logits(rollout)

    received = _sync(actor, rollout)
    assert received["mismatch"] is None and received["missing"] == []
    assert received["merges_verified"] == 6  # each merged weight, as held, is its merge
    assert set(received["manifest"]) == {n for n, _ in rollout.named_parameters()}
    got, expected = _logits(rollout), _logits(merged)
    assert (base - expected).abs().max() > 0.1  # the adapters matter
    # float32 throughout; the two merges may round B·A's products differently
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)

    dropped = [name for name, _ in actor.hf_weights()][1]
    received = _sync(actor, AutoModelForCausalLM.from_pretrained(str(directory)), drop="drop")
    expected = f"1 tensor(s) sent but never loaded (first: {dropped!r})"
    if dropped in actor.weight_probes:  # a merged weight: the probe check names it too
        expected += f"; 1 of 6 merged weight(s) never arrived (first: {dropped!r})"
    assert received["mismatch"] == expected

    # lora_merge_bad: one module sent as its base alone; it arrives whole (the fingerprints
    # agree) but is not the merge of the factors the actor probed.
    from hfsdk_faults import faults

    monkeypatch.setenv(faults.FAULT_ENV, f"lora_merge_bad:{actor.weights_version}")
    monkeypatch.setattr(faults, "_FIRED", set())
    received = _sync(actor, AutoModelForCausalLM.from_pretrained(str(directory)))
    first = next(iter(actor.weight_probes))
    assert received["mismatch"].startswith(
        f"1 of 6 merged weight(s) wrong: {first!r} is not the merge of its base weight"
    ), received["mismatch"]


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_a_colocated_rollout_checks_each_merged_weight_and_catches_a_bad_merge(
    arch: str, model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The colocated ``hf`` rollout of a LoRA actor fills its generation module from the
    merged stream and checks every merged weight it holds against the probe the actor took
    from the base weight and the factors (``sync/merges_verified``; GPT-2's ``Conv1D``
    weights take the update transposed); ``lora_merge_bad`` (one module sent without its
    adapter) raises ``WeightSyncMismatch`` in one line before anything is generated, and
    the next call, whole again, generates what the first did."""
    from hfsdk import Batch
    from hfsdk_backend_common import WeightSyncMismatch
    from hfsdk_backend_common.rollout.hf_rollout import HFRollout
    from hfsdk_backend_common.rollout_config import HFRolloutConfig
    from hfsdk_faults import faults

    directory = model_dir if arch == "llama" else _gpt2_dir(tmp_path / "gpt2", model_dir)
    actor = _lora_actor(directory, arch)
    rollout = HFRollout(HFRolloutConfig(max_response_length=4), actor)
    prompts = Batch.from_dict(
        tensors={"input_ids": IDS, "attention_mask": torch.ones_like(IDS)},
        non_tensors={"uid": ["a", "b"]},
    )
    out = rollout.generate_sequences(prompts, greedy=True)
    metrics = out.meta["rollout_metrics"]
    assert metrics["sync/verified"] == 1.0
    assert metrics["sync/merges_verified"] == 3 * 2  # three targets in each of 2 layers
    assert len(actor.weight_probes) == 6
    assert all(n.removesuffix(".weight").endswith(TARGETS[arch]) for n in actor.weight_probes)
    first = next(iter(actor.weight_probes))  # the stream's first merged module

    monkeypatch.setenv(faults.FAULT_ENV, f"lora_merge_bad:{actor.weights_version}")
    monkeypatch.setattr(faults, "_FIRED", set())
    with pytest.raises(WeightSyncMismatch) as info:
        rollout.generate_sequences(prompts, greedy=True)
    line = str(info.value)
    assert "\n" not in line
    assert line.startswith(
        "the generation module of the actor's weights version 0 does not hold the actor's "
        f"merged weights: 1 of 6 merged weight(s) wrong: {first!r} is not the merge of its "
        "base weight and adapter"
    ), line
    again = rollout.generate_sequences(prompts, greedy=True)  # the fault fired once
    assert torch.equal(again["responses"], out["responses"])
