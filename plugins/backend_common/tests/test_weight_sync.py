"""The bucketed weight broadcast between an actor and a rollout replica (gloo, two threads)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import torch

from hfsdk_backend_common.weight_sync import (
    WeightSyncGroup,
    open_store,
    receive_weights,
    send_weights,
)


def _llama(seed: int) -> Any:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        pad_token_id=0, eos_token_id=None,
    )  # fmt: skip
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():  # peaked logits: greedy decoding has no near-ties
        for param in model.parameters():
            if param.dim() == 2:
                param.normal_(0.0, 0.3)
    return model


def _greedy(model: Any, prompts: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        out = model.generate(
            input_ids=prompts,
            attention_mask=torch.ones_like(prompts),
            max_new_tokens=12,
            do_sample=False,
            pad_token_id=0,
        )
    return out[:, prompts.shape[1] :]


def _sync(sender: Any, receiver: Any, bucket_bytes: int) -> tuple[dict, dict]:
    store, endpoint = open_store("127.0.0.1", world_size=2, timeout_s=60)
    results: dict[str, Any] = {}

    def receive() -> None:
        group = WeightSyncGroup(endpoint, 1, timeout_s=60)
        results["received"] = receive_weights(group, dict(receiver.named_parameters()))

    thread = threading.Thread(target=receive)
    thread.start()
    group = WeightSyncGroup(endpoint, 0, store=store, timeout_s=60)
    sent = send_weights(group, sender.named_parameters(), bucket_bytes=bucket_bytes)
    thread.join(timeout=60)
    assert not thread.is_alive()
    return sent, results["received"]


@pytest.mark.parametrize("bucket_bytes", [10_000, 1 << 30])
def test_the_rollout_holds_the_actors_new_weights_after_a_sync(bucket_bytes: int) -> None:
    old, new = _llama(0), _llama(1)
    replica = _llama(0)  # the rollout's copy: still the old weights
    prompts = torch.randint(1, 64, (3, 5), generator=torch.Generator().manual_seed(0))
    before = _greedy(replica, prompts)
    sent, received = _sync(new, replica, bucket_bytes)
    for name, param in new.named_parameters():
        assert torch.equal(dict(replica.named_parameters())[name], param), name
    fresh = _llama(2)
    fresh.load_state_dict(new.state_dict())  # a fresh engine on the new weights
    after = _greedy(replica, prompts)
    assert torch.equal(after, _greedy(fresh, prompts))
    assert not torch.equal(after, before)
    assert torch.equal(before, _greedy(old, prompts))
    total = sum(p.numel() * p.element_size() for p in new.parameters())
    assert sent["sync/bytes"] == received["sync/bytes"] == total
    params = len(list(new.parameters()))
    if bucket_bytes < 20_000:
        assert 1 < sent["sync/buckets"] < params + 1  # several tensors per bucket, several buckets
    else:
        assert sent["sync/buckets"] == 1
    assert received["missing"] == []
    assert received["sync/wait_s"] >= 0.0


_JOIN_AND_DIE = """
import os, sys
from hfsdk_backend_common.weight_sync import SyncEndpoint, WeightSyncGroup
endpoint = SyncEndpoint(host="127.0.0.1", port=int(sys.argv[1]), world_size=2)
WeightSyncGroup(endpoint, 1, timeout_s=60)
os._exit(0)  # a replica that dies after joining, as a killed one would
"""


def test_a_send_to_a_dead_replica_reports_the_failure_and_reads_every_weight() -> None:
    """The actor's other ranks read ``hf_weights`` collectively with rank 0: after the
    broadcast fails, rank 0 must still read them all, and answer instead of raising."""
    import subprocess
    import sys

    from hfsdk_backend_common.weight_sync import WeightSenderMixin

    model = _llama(0)
    read: list[str] = []

    class _Engine:
        device = torch.device("cpu")

        def hf_weights(self) -> Any:
            for name, param in model.named_parameters():
                read.append(name)
                yield name, param

    class _Sender(WeightSenderMixin):
        rank = 0
        engine = _Engine()

    store, endpoint = open_store("127.0.0.1", world_size=2, timeout_s=60)
    replica = subprocess.Popen([sys.executable, "-c", _JOIN_AND_DIE, str(endpoint.port)])
    sender = _Sender()
    sender._sync_group = WeightSyncGroup(endpoint, 0, store=store, timeout_s=60)
    assert replica.wait(timeout=60) == 0
    first = sender.send_weights(10_000)
    assert set(first) == {"sync/failed"} and first["sync/failed"]
    assert read == [name for name, _ in model.named_parameters()]
    again = sender.send_weights(10_000)
    assert "earlier weight sync failed" in again["sync/failed"]
    assert len(read) == 2 * len(list(model.parameters()))


def _faulty_sync(sender: Any, receiver: Any, drop: str | None, stale: str | None) -> dict:
    store, endpoint = open_store("127.0.0.1", world_size=2, timeout_s=60)
    results: dict[str, Any] = {}

    def receive() -> None:
        group = WeightSyncGroup(endpoint, 1, timeout_s=60)
        targets = dict(receiver.named_parameters())
        results["received"] = receive_weights(group, targets, fault=stale)

    thread = threading.Thread(target=receive)
    thread.start()
    group = WeightSyncGroup(endpoint, 0, store=store, timeout_s=60)
    send_weights(group, sender.named_parameters(), bucket_bytes=10_000, version=7, fault=drop)
    thread.join(timeout=60)
    assert not thread.is_alive()
    return results["received"]


def test_a_clean_sync_is_verified_against_the_senders_manifest() -> None:
    received = _faulty_sync(_llama(1), _llama(0), None, None)
    assert received["mismatch"] is None and received["version"] == 7
    assert set(received["manifest"]) == {n for n, _ in _llama(1).named_parameters()}


def test_a_dropped_tensor_fails_verification_naming_it() -> None:
    sender = _llama(1)
    dropped = [n for n, _ in sender.named_parameters()][1]
    received = _faulty_sync(sender, _llama(0), "drop", None)
    assert received["mismatch"] == f"1 tensor(s) sent but never loaded (first: {dropped!r})"


def test_weights_that_never_reached_the_live_tensors_fail_verification() -> None:
    """The stream arrived whole but was written into copies: the rollout keeps the old
    weights, which the read-back finds: exactly the tensors the two models differ in."""
    received = _faulty_sync(_llama(1), _llama(0), None, "stale")
    old, new = dict(_llama(0).named_parameters()), dict(_llama(1).named_parameters())
    changed = [n for n in new if not torch.equal(new[n], old[n])]
    assert 0 < len(changed) < len(new)  # the norms start at one in both
    assert received["mismatch"] == (
        f"{len(changed)} of {len(new)} tensor(s) differ from what was sent "
        f"(first: {sorted(changed)[0]!r})"
    )
    same = _faulty_sync(_llama(0), _llama(0), None, "stale")  # nothing changed: nothing stale
    assert same["mismatch"] is None
