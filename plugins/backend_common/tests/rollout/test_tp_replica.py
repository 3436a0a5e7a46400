"""Tensor-parallel / pipelined rollout replicas (``placement.pools.rollout.tp``, ``.pp``):
slices, stages, sync, decoding."""

from __future__ import annotations

import random
import threading
from pathlib import Path
from typing import Any

import pytest
import torch

from hfsdk import HfsdkError
from hfsdk.core.config import load_run_config
from hfsdk_backend_common.hybrid.llama_format import (
    grouped_qkv,
    hf_llama_shape,
    hf_llama_to_megatron,
    llama_specs,
)
from hfsdk_backend_common.rollout.tp_replica import (
    SliceReceiver,
    megatron_slices,
    rank_layout,
    stage_problems,
)

HERE = str(Path(__file__).parent)
WIDTH = 6


def _llama(seed: int, vocab: int = 25) -> Any:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=vocab, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        pad_token_id=0, eos_token_id=None, tie_word_embeddings=False,
    )  # fmt: skip
    torch.manual_seed(seed)
    return LlamaForCausalLM(config).eval()


def test_each_tp_slice_is_the_matching_piece_of_the_full_weight() -> None:
    model = _llama(0)  # vocab 25: the last rank's vocabulary rows are padded
    state = {n: p.detach() for n, p in model.named_parameters()}
    shape = hf_llama_shape(model.config)
    hd, f = shape.head_dim, shape.intermediate_size
    for rank in range(2):
        got = megatron_slices(state, shape, 2, rank)
        assert set(got) == {s.name for s in llama_specs(shape)}
        pre, hf = "decoder.layers.1.", "model.layers.1."
        q = state[hf + "self_attn.q_proj.weight"][rank * 2 * hd : (rank + 1) * 2 * hd]
        k = state[hf + "self_attn.k_proj.weight"][rank * hd : (rank + 1) * hd]
        v = state[hf + "self_attn.v_proj.weight"][rank * hd : (rank + 1) * hd]
        assert torch.equal(got[pre + "self_attention.linear_qkv.weight"], grouped_qkv(q, k, v, 1))
        cols = slice(rank * 2 * hd, (rank + 1) * 2 * hd)
        assert torch.equal(
            got[pre + "self_attention.linear_proj.weight"],
            state[hf + "self_attn.o_proj.weight"][:, cols],
        )
        rows = slice(rank * f // 2, (rank + 1) * f // 2)
        gate, up = got[pre + "mlp.linear_fc1.weight"].chunk(2)
        assert torch.equal(gate, state[hf + "mlp.gate_proj.weight"][rows])
        assert torch.equal(up, state[hf + "mlp.up_proj.weight"][rows])
        assert torch.equal(
            got[pre + "mlp.linear_fc2.weight"], state[hf + "mlp.down_proj.weight"][:, rows]
        )
        assert torch.equal(
            got[pre + "input_layernorm.weight"], state[hf + "input_layernorm.weight"]
        )
        embed = got["embedding.word_embeddings.weight"]
        assert embed.shape == (13, shape.hidden_size)  # 25 rows padded to 26, 13 per rank
        real = state["model.embed_tokens.weight"][rank * 13 : rank * 13 + 13]
        assert torch.equal(embed[: len(real)], real)
        assert not embed[len(real) :].any()  # the padding row is zero
        lm = state["lm_head.weight"][rank * 13 : rank * 13 + 13]
        assert torch.equal(got["output_layer.weight"][: len(lm)], lm)


def test_the_receiver_builds_the_slices_from_full_tensors_in_any_order() -> None:
    old, new = _llama(0), _llama(1)
    shape = hf_llama_shape(new.config)
    state = {n: p.detach() for n, p in new.named_parameters()}
    for rank in range(2):
        slices = megatron_slices({n: p.detach() for n, p in old.named_parameters()}, shape, 2, rank)
        receiver = SliceReceiver(slices, shape, tg=2, tp_rank=rank, tied=False)
        names = list(state)
        random.Random(rank).shuffle(names)
        for name in names:
            receiver.accept(name, state[name])
        assert receiver.missing() == [] and receiver.pending == {}
        expected = megatron_slices(state, shape, 2, rank)
        for name, tensor in expected.items():
            assert torch.equal(slices[name], tensor), name
    with pytest.raises(HfsdkError, match="has no slice for"):
        receiver.accept("model.layers.9.mlp.up_proj.weight", torch.zeros(1))


def test_a_slice_whose_write_was_lost_fails_the_read_back() -> None:
    """``slice_drop``: the receiver counts its first slice as written but never copies it;
    reading the slices back against what was written names exactly that slice."""
    from hfsdk_backend_common import fingerprint
    from hfsdk_backend_common.weight_sync import verify_sync

    old, new = _llama(0), _llama(1)
    shape = hf_llama_shape(new.config)
    state = {n: p.detach() for n, p in new.named_parameters()}
    slices = megatron_slices({n: p.detach() for n, p in old.named_parameters()}, shape, 2, 1)
    receiver = SliceReceiver(slices, shape, tg=2, tp_rank=1, tied=False, lose_first_write=True)
    for name in state:
        receiver.accept(name, state[name])
    assert receiver.missing() == []  # every slice counts as written...
    wire = {name: fingerprint(t) for name, t in state.items()}
    stream = {"manifest": wire, "wire": wire}  # ...and the stream itself arrived whole
    held = {name: fingerprint(slices[name]) for name in receiver.written}
    first = next(iter(receiver.written))
    assert verify_sync(stream, receiver.written, held) == (
        f"1 of {len(receiver.written)} tensor(s) differ from what was sent (first: {first!r})"
    )
    clean = SliceReceiver(slices, shape, tg=2, tp_rank=1, tied=False)
    for name in state:
        clean.accept(name, state[name])
    held = {name: fingerprint(slices[name]) for name in clean.written}
    assert verify_sync(stream, clean.written, held) is None


def test_each_stage_keeps_its_layers_and_ends_and_the_stages_cover_the_model() -> None:
    model = _llama(0)
    state = {n: p.detach() for n, p in model.named_parameters()}
    shape = hf_llama_shape(model.config)
    everything = megatron_slices(state, shape, 2, 1)
    first = megatron_slices(state, shape, 2, 1, stage=0, pg=2)
    last = megatron_slices(state, shape, 2, 1, stage=1, pg=2)
    assert "embedding.word_embeddings.weight" in first and "output_layer.weight" not in first
    assert "output_layer.weight" in last and "decoder.final_layernorm.weight" in last
    assert "embedding.word_embeddings.weight" not in last
    assert all(".layers.1." not in n for n in first) and all(".layers.0." not in n for n in last)
    assert not set(first) & set(last) and set(first) | set(last) == set(everything)
    for name, tensor in {**first, **last}.items():
        assert torch.equal(tensor, everything[name]), name
    # stage-major: a replica of 2 stages of 2 tensor ranks is ranks 0-3, stage 1 = ranks 2, 3
    assert [rank_layout(r, 8, 2, 2) for r in (0, 1, 2, 3, 5)] == [
        (0, 0, 0), (0, 0, 1), (0, 1, 0), (0, 1, 1), (1, 0, 1),
    ]  # fmt: skip
    (message,) = stage_problems(3, 2, where="placement.pools.rollout (tp=1, pp=2)")
    assert "3 layers into 2 generation stages" in message and "\n" not in message
    assert stage_problems(4, 2, where="x") == []


def test_a_stage_receiver_builds_only_its_stage_and_drops_the_rest() -> None:
    old, new = _llama(0), _llama(1)
    shape = hf_llama_shape(new.config)
    state = {n: p.detach() for n, p in new.named_parameters()}
    for stage in range(2):
        old_state = {n: p.detach() for n, p in old.named_parameters()}
        slices = megatron_slices(old_state, shape, 1, 0, stage=stage, pg=2)
        receiver = SliceReceiver(slices, shape, tg=1, tp_rank=0, tied=False)
        for name in reversed(list(state)):
            receiver.accept(name, state[name])
        assert receiver.missing() == [] and receiver.pending == {}
        expected = megatron_slices(state, shape, 1, 0, stage=stage, pg=2)
        assert set(slices) == set(expected)
        for name, tensor in expected.items():
            assert torch.equal(slices[name], tensor), name
    with pytest.raises(HfsdkError, match="has no slice for"):
        receiver.accept("model.layers.9.mlp.up_proj.weight", torch.zeros(1))


def test_hf_to_megatron_is_unchanged_by_the_per_weight_table() -> None:
    model = _llama(0)
    state = {n: p.detach() for n, p in model.named_parameters()}
    out = hf_llama_to_megatron(state, hf_llama_shape(model.config))
    assert torch.equal(out["output_layer.weight"], state["lm_head.weight"])
    tied = {n: t for n, t in state.items() if n != "lm_head.weight"}
    out = hf_llama_to_megatron(tied, hf_llama_shape(model.config))
    assert torch.equal(out["output_layer.weight"], state["model.embed_tokens.weight"])


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["placement.pools.global.devices=2", "placement.pools.global.tp=2"],
         r"placement.pools.global.tp=2, but tp applies only to the rollout pool"),
        (["placement.pools.rollout.devices=3", "placement.pools.rollout.tp=2"],
         r"placement.pools.rollout.tp.*must divide 'devices' \(3\)"),
        (["placement.pools.rollout.tp=0"], r"placement.pools.rollout.tp"),
        (["placement.pools.global.devices=2", "placement.pools.global.pp=2"],
         r"placement.pools.global.pp=2, but pp applies only to the rollout pool"),
        (["placement.pools.rollout.devices=2", "placement.pools.rollout.tp=2",
          "placement.pools.rollout.pp=2"],
         r"placement.pools.rollout.pp': \(2\) times tp \(2\) must divide 'devices' \(2\)"),
        (["placement.pools.rollout.pp=0"], r"placement.pools.rollout.pp"),
    ],
)  # fmt: skip
def test_bad_tp_settings_are_refused_in_one_line(overrides: list[str], message: str) -> None:
    with pytest.raises(HfsdkError, match=message) as info:
        load_run_config("grpo", None, overrides)
    assert "\n" not in str(info.value)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A peaked tiny Llama (4 heads, 2 key/value heads) and its update, on the default tokenizer."""
    from hfsdk import default_task_assets, load_tokenizer
    from hfsdk_testing import save_tiny_llama

    tokenizer = load_tokenizer(default_task_assets().model_dir)
    root = tmp_path_factory.mktemp("tp_replica")
    common = {"hidden_size": 64, "intermediate_size": 64, "num_heads": 4, "num_kv_heads": 2}
    old = save_tiny_llama(root / "old", tokenizer, init_std=0.2, seed=0, **common)
    new = save_tiny_llama(root / "new", tokenizer, init_std=0.2, seed=1, **common)
    tokenizer.padding_side = "left"
    encoded = tokenizer(["3 + 5 =", "1 + 2 + 3 =", "9 + 9 =", "4 ="], return_tensors="pt",
                        padding=True)  # fmt: skip
    prompts = {"input_ids": encoded.input_ids, "attention_mask": encoded.attention_mask}
    return {"old": str(old), "new": str(new), "prompts": prompts}


def _full_engine(path: str, prompts: dict) -> tuple[Any, Any]:
    """A fresh tp = 1 replica source on ``path`` and its greedy rollout output."""
    from hfsdk import Batch, DataParallelInfo, build_rollout
    from hfsdk_backend_common.rollout.replica import ReplicaSource

    source = ReplicaSource(
        path, path, device=torch.device("cpu"), dtype=torch.float32, dp=DataParallelInfo()
    )
    config = load_run_config("grpo", None, [f"rollout.max_response_length={WIDTH}"]).rollout
    rollout = build_rollout(config, source)
    return source, rollout.generate_sequences(Batch.from_dict(tensors=prompts), n=1, greedy=True)


@pytest.mark.distributed
@pytest.mark.parametrize("pg", [1, 2], ids=["tp2", "pp2"])
def test_a_two_rank_replica_decodes_what_a_full_engine_does_before_and_after_a_sync(
    models: dict[str, Any], pg: int
) -> None:
    """Two gloo ranks form one tp-2 (or pp-2: two stages of one rank) replica; the test process
    sends the new weights over the sync group: the replica's greedy tokens equal a fresh tp = 1
    engine's on the old, then the new weights (which differ), and its log-probs a full-module
    forward's."""
    from transformers import AutoModelForCausalLM

    from hfsdk_backend_common.testing.launch import run_gloo
    from hfsdk_backend_common.weight_sync import WeightSyncGroup, open_store, send_weights

    store, endpoint = open_store("127.0.0.1", world_size=3, timeout_s=120)
    sent: dict[str, Any] = {}

    def send() -> None:
        group = WeightSyncGroup(endpoint, 0, store=store, timeout_s=120)
        module = AutoModelForCausalLM.from_pretrained(models["new"])
        sent.update(send_weights(group, module.named_parameters(), bucket_bytes=16 * 1024))

    thread = threading.Thread(target=send)
    thread.start()
    ranks = run_gloo(
        2, "tp_replica_rank:replica_rank",
        {"model": models["old"], "endpoint": endpoint, "prompts": models["prompts"],
         "width": WIDTH, "pg": pg},
        path=[HERE], timeout=300,
    )  # fmt: skip
    thread.join(timeout=60)
    if pg == 2:  # each stage held only its layer and ends
        first, last = (set(r["held"]) for r in ranks)
        assert "embedding.word_embeddings.weight" in first - last
        assert "output_layer.weight" in last - first and not first & last
    assert all(r["missing"] == [] and r["bytes"] == sent["sync/bytes"] > 0 for r in ranks)
    _, old = _full_engine(models["old"], models["prompts"])
    new_source, new = _full_engine(models["new"], models["prompts"])
    before = torch.cat([r["before"] for r in ranks])
    after = torch.cat([r["after"]["responses"] for r in ranks])
    assert torch.equal(before, old["responses"])
    assert torch.equal(after, new["responses"])
    assert not torch.equal(after, before)
    from hfsdk import Batch
    from hfsdk_backend_common.rollout.replica import replica_log_probs

    batch = Batch.from_dict(
        tensors={k: torch.cat([r["after"][k] for r in ranks]) for k in ranks[0]["after"]},
        meta={"temperature": 1.0},
    )
    expected = replica_log_probs(new_source.module, batch)
    got = torch.cat([r["log_probs"] for r in ranks])
    assert got.abs().sum() > 0
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=0)


# Heavy: two gloo processes of their own, for the only check of the replica's runtime
# refusal (the config-time refusals below stay quick).
@pytest.mark.heavy
@pytest.mark.distributed
def test_a_tp2_replica_refuses_rollouts_that_want_full_weights(models: dict[str, Any]) -> None:
    from hfsdk_backend_common.testing.launch import run_gloo

    ranks = run_gloo(
        2, "tp_replica_rank:refusals", {"model": models["old"]}, path=[HERE], timeout=300
    )
    for messages in ranks:
        assert len(messages) == 3 and messages[2] == "taken=False"
        for message in messages[:2]:
            assert message.startswith("placement.pools.rollout.tp=2: the rollout asked for")
            assert "\n" not in message


@pytest.mark.parametrize(
    ("tg", "pg", "message"),
    [(2, 1, r"placement.pools.rollout.tp=2 does not divide"),
     (1, 2, r"\(tp=1, pp=2\) splits the model's 1 layers into 2 generation stages")],
)  # fmt: skip
def test_a_model_tp_cannot_split_is_refused_in_one_line(
    tmp_path: Path, tg: int, pg: int, message: str
) -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    from hfsdk import DataParallelInfo, default_task_assets
    from hfsdk_backend_common.rollout.tp_replica import TPReplicaSource

    config = LlamaConfig(
        vocab_size=26, hidden_size=48, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=3, num_key_value_heads=3,
    )  # fmt: skip
    LlamaForCausalLM(config).save_pretrained(tmp_path / "model")
    with pytest.raises(HfsdkError, match=message) as info:
        TPReplicaSource(
            str(tmp_path / "model"), str(default_task_assets().model_dir),
            device=torch.device("cpu"), dtype=torch.float32, dp=DataParallelInfo(size=2),
            tg=tg, pg=pg, rank=0, world=2,
        )  # fmt: skip
    assert "\n" not in str(info.value)
