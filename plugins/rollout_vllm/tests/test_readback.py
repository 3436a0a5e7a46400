"""The read-back check of a vLLM reload, on a stand-in engine (no vLLM started)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

import pytest
import torch

from hfsdk_backend_common import WeightSyncMismatch, bit_sum
from hfsdk_rollout_vllm.readback import RecordedStream, name_mapping, verified_reload


class _Model(torch.nn.Module):
    packed_modules_mapping: ClassVar = {"qkv_proj": ["q_proj", "k_proj", "v_proj"]}


def _weights() -> list[tuple[str, torch.Tensor]]:
    generator = torch.Generator().manual_seed(0)
    names = ["embed.weight", "attn.q_proj.weight", "attn.k_proj.weight", "attn.v_proj.weight"]
    return [(name, torch.randn(4, 3, generator=generator)) for name in names]


class _Engine:
    """Holds what a fused, zero-padded engine would: q/k/v in one tensor, padded rows."""

    def __init__(self, lose: str | None = None) -> None:
        self.held: dict[str, torch.Tensor] = {}
        self.lose = lose
        self.reloads = 0

    def engine_name(self):
        return name_mapping(_Model())

    def reload_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        got = dict(weights)
        self.reloads += 1
        qkv = [got[f"attn.{p}_proj.weight"] for p in "qkv" if f"attn.{p}_proj.weight" in got]
        self.held = {
            "embed.weight": torch.cat(
                [got["embed.weight"], got["embed.weight"].new_zeros(2, 3)]
            ),  # padding
            "attn.qkv_proj.weight": torch.cat(qkv).T.contiguous(),  # fused, another layout
        }

    def held_sums(self) -> dict[str, int]:
        return {name: bit_sum(t) for name, t in self.held.items()}


def test_the_names_follow_vllms_packing() -> None:
    engine_name = name_mapping(_Model())
    assert engine_name("model.layers.0.self_attn.k_proj.weight") == (
        "model.layers.0.self_attn.qkv_proj.weight"
    )
    assert engine_name("model.norm.weight") == "model.norm.weight"


def test_bit_sums_add_up_across_fusion_transposition_and_zero_padding() -> None:
    engine = _Engine()
    metrics = verified_reload(engine, _weights(), dtype=torch.float32, version=1)
    assert metrics["sync/verified"] == 1.0 and metrics["timing/vllm_verify_s"] >= 0.0


def test_a_dropped_tensor_and_a_changed_element_are_named(monkeypatch) -> None:
    from hfsdk_faults import faults

    monkeypatch.setenv(faults.FAULT_ENV, "vllm_drop:4")
    monkeypatch.setattr(faults, "_FIRED", set())
    with pytest.raises(WeightSyncMismatch) as info:  # q_proj left out of the stream
        verified_reload(_Engine(), _weights(), dtype=torch.float32, version=4)
    assert str(info.value) == (
        "the vLLM engine does not hold the actor's weights version 4 after reloading them: "
        "1 of 2 tensor(s) differ from what was sent (first: 'attn.qkv_proj.weight'); it would "
        "generate with weights other than the actor's"
    )
    stream = RecordedStream(_weights(), dtype=torch.float32, engine_name=name_mapping(_Model()))
    engine = _Engine()
    engine.reload_weights(stream)
    engine.held["embed.weight"][0, 0] = torch.nextafter(
        engine.held["embed.weight"][0, 0], torch.tensor(9.0)
    )  # one element, one ulp
    assert stream.problem(engine.held_sums()) == (
        "1 of 2 tensor(s) differ from what was sent (first: 'embed.weight')"
    )


def test_sums_are_taken_in_the_engines_dtype_and_verification_can_be_off() -> None:
    engine = _Engine()
    weights = [(name, t.to(torch.bfloat16)) for name, t in _weights()]
    recorded = RecordedStream(_weights(), dtype=torch.bfloat16, engine_name=engine.engine_name())
    engine.reload_weights(weights)  # what a bfloat16 engine's loader stores
    list(recorded)
    assert recorded.problem(engine.held_sums()) is None
    off = _Engine()
    off.held_sums = None  # type: ignore[assignment]  # never read back
    assert verified_reload(off, _weights(), dtype=torch.float32, version=2, verify=False) == {}
    assert off.reloads == 1


class _KeepingEngine(_Engine):
    """Writes only the tensors it is sent and keeps the others, as vLLM's in-place reload does."""

    def reload_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        got = dict(weights)
        self.reloads += 1
        if "embed.weight" in got:
            embed = got["embed.weight"]
            self.held["embed.weight"] = torch.cat([embed, embed.new_zeros(2, 3)])
        qkv = [got[f"attn.{p}_proj.weight"] for p in "qkv" if f"attn.{p}_proj.weight" in got]
        if qkv:
            self.held["attn.qkv_proj.weight"] = torch.cat(qkv).T.contiguous()


def test_an_engine_tensor_the_stream_left_out_is_named() -> None:
    """A reload whose stream leaves a whole (unfused) tensor out: the engine keeps the old
    one, which no streamed tensor is compared with; it is named as never written."""
    engine = _KeepingEngine()
    assert verified_reload(engine, _weights(), dtype=torch.float32, version=1)["sync/verified"]
    changed = [(name, t + 1.0) for name, t in _weights() if name != "embed.weight"]
    with pytest.raises(WeightSyncMismatch) as info:
        verified_reload(engine, changed, dtype=torch.float32, version=2)
    assert str(info.value) == (
        "the vLLM engine does not hold the actor's weights version 2 after reloading them: "
        "1 engine tensor(s) the reload never wrote (first: 'embed.weight'); it would "
        "generate with weights other than the actor's"
    )


def _rows_of_rank(rank: int):
    """A stand-in for :func:`rank_slicer` at tp=2: q/k/v split by rows, the rest replicated."""

    def cut(name: str, tensor: torch.Tensor) -> torch.Tensor:
        return tensor if name == "embed.weight" else tensor.chunk(2)[rank]

    return cut


class _SlicedEngine(_Engine):
    """One tensor-parallel rank: loads the whole embedding and its half of q, k and v."""

    def __init__(self, rank: int) -> None:
        super().__init__()
        self.rank = rank

    def rank_slicer(self):
        return _rows_of_rank(self.rank)

    def reload_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        cut = _rows_of_rank(self.rank)
        super().reload_weights((name, cut(name, t)) for name, t in weights)


def test_a_sliced_engine_is_compared_with_its_slices_and_the_fault_drops_a_slice(
    monkeypatch,
) -> None:
    from hfsdk_faults import faults

    for rank in (0, 1):  # each rank's slices, not the whole tensors, are what it was sent
        metrics = verified_reload(
            _SlicedEngine(rank), _weights(), dtype=torch.float32, version=1, sliced=True
        )
        assert metrics["sync/verified"] == 1.0
    with pytest.raises(WeightSyncMismatch, match=r"1 of 2 tensor\(s\) differ"):  # compared whole
        verified_reload(_SlicedEngine(1), _weights(), dtype=torch.float32, version=1)
    monkeypatch.setenv(faults.FAULT_ENV, "vllm_drop:3")
    monkeypatch.setattr(faults, "_FIRED", set())
    # The fault skips the replicated embedding and drops the first slice (q_proj's half).
    with pytest.raises(WeightSyncMismatch, match=r"first: 'attn\.qkv_proj\.weight'"):
        verified_reload(_SlicedEngine(1), _weights(), dtype=torch.float32, version=3, sliced=True)
    assert faults.fault_requested("vllm_drop", 3)
    metrics = verified_reload(  # the caller decided this rank takes no fault
        _SlicedEngine(0), _weights(), dtype=torch.float32, version=3, sliced=True, drop=False
    )
    assert metrics["sync/verified"] == 1.0


def test_a_stale_reload_and_a_wrong_merge_are_caught_on_a_stand_in_engine(monkeypatch) -> None:
    """``vllm_stale``: the stream is consumed, the engine keeps what it held (here nothing
    of q/k/v): the read-back names it. A derived weight (a LoRA merge) is checked against
    the sender's probe as the loader gets it: a merge without its update is named even
    though the engine holds exactly what was sent."""
    from hfsdk_backend_common import low_rank_probe
    from hfsdk_faults import faults

    engine = _Engine()
    engine.reload_weights(_weights())
    old = {name: t.clone() for name, t in engine.held.items()}
    changed = [(name, t + 1.0) for name, t in _weights()]
    monkeypatch.setenv(faults.FAULT_ENV, "vllm_stale:5")
    monkeypatch.setattr(faults, "_FIRED", set())
    with pytest.raises(WeightSyncMismatch, match=r"2 of 2 tensor\(s\) differ"):
        verified_reload(engine, changed, dtype=torch.float32, version=5)
    assert all(torch.equal(old[n], t) for n, t in engine.held.items())  # never written

    generator = torch.Generator().manual_seed(3)
    base, down, up = _weights()[1][1], torch.randn(2, 3, generator=generator), torch.randn(4, 2)
    probes = {"attn.q_proj.weight": low_rank_probe(base, down, up, 2.0, dtype=torch.float32)}
    good = [(n, base + 2.0 * up @ down if n == "attn.q_proj.weight" else t) for n, t in _weights()]
    metrics = verified_reload(
        _Engine(), good, dtype=torch.float32, version=6, probes=lambda: probes
    )
    assert metrics["sync/merges_verified"] == 1.0 and metrics["sync/verified"] == 1.0
    with pytest.raises(WeightSyncMismatch) as info:  # the base alone: the adapter left out
        verified_reload(
            _Engine(), _weights(), dtype=torch.float32, version=7, probes=lambda: probes
        )
    assert "1 of 1 merged weight(s) wrong: 'attn.q_proj.weight' is not the merge" in str(info.value)
    assert "differ from what was sent" not in str(info.value)


class _EmptyShareEngine(_SlicedEngine):
    """Rank 1 of a vocabulary too small to split: its embedding slice has no rows."""

    def rank_slicer(self):
        def cut(name: str, tensor: torch.Tensor) -> torch.Tensor:
            if name == "embed.weight":
                return tensor.narrow(0, tensor.shape[0], 0)
            return tensor.chunk(2)[self.rank]

        return cut

    def reload_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        cut = self.rank_slicer()
        _Engine.reload_weights(self, ((name, cut(name, t)) for name, t in weights))


def test_the_drop_fault_takes_a_slice_that_holds_data(monkeypatch) -> None:
    from hfsdk_faults import faults

    monkeypatch.setenv(faults.FAULT_ENV, "vllm_drop:7")
    monkeypatch.setattr(faults, "_FIRED", set())
    # Before: the empty embedding share was "dropped" (nothing lost), the sync verified.
    with pytest.raises(WeightSyncMismatch, match=r"first: 'attn\.qkv_proj\.weight'"):
        verified_reload(
            _EmptyShareEngine(1), _weights(), dtype=torch.float32, version=7, sliced=True
        )


class _FlushingKernel:
    """A stand-in for vLLM's CPU oneDNN matmul: computes with the weight it packed, and like
    it returns a -0.0 weight as +0.0 and flushes a subnormal one to 0 (measured on vLLM's
    ``onednn_mm`` with a bfloat16 weight)."""

    def __init__(self, weight: torch.Tensor) -> None:
        self.packed = weight.clone()

    def apply(self, layer: torch.nn.Module, x: torch.Tensor, bias: None) -> torch.Tensor:
        out = (x.float() @ self.packed.float().T).to(x.dtype)
        return torch.where(out.abs() < torch.finfo(x.dtype).tiny, torch.zeros_like(out), out)


class _KernelModel(_Model):
    """q/k/v fused into one linear layer whose weight lives in a kernel (the parameter empty),
    as on CPU; the embeddings held as they are."""

    def __init__(self, weights: dict[str, torch.Tensor], dtype: torch.dtype) -> None:
        super().__init__()
        self.embed = torch.nn.Module()
        self.embed.weight = torch.nn.Parameter(weights["embed.weight"].to(dtype))
        self.attn = torch.nn.Module()
        self.attn.qkv_proj = torch.nn.Module()
        self.attn.qkv_proj.weight = torch.nn.Parameter(torch.empty(0, dtype=dtype))
        qkv = torch.cat([weights[f"attn.{p}_proj.weight"] for p in "qkv"]).to(dtype)
        self.attn.qkv_proj.input_size_per_partition = qkv.shape[1]
        self.attn.qkv_proj.quant_method = _FlushingKernel(qkv)


class _KernelEngine(_Engine):
    """Reads back through :func:`held_sums`, its linear weight through the kernel."""

    def reload_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        self.reloads += 1
        self.model = _KernelModel(dict(weights), torch.bfloat16)

    def held_sums(self) -> dict[str, int]:
        from hfsdk_rollout_vllm.readback import held_sums

        return held_sums(self.model)


def test_a_kernel_held_weight_with_minus_zero_and_a_subnormal_verifies() -> None:
    """A kernel-held weight is read back as the kernel computes with it: -0.0 as +0.0 and a
    subnormal as 0, which is the same weight (a pruned checkpoint's W*mask holds -0.0), so a
    correct reload verifies; a held-as-is tensor keeps the exact comparison of its bits."""
    weights = dict(_weights())
    weights["attn.q_proj.weight"][0, 0] = -0.0
    weights["attn.k_proj.weight"][1, 2] = 1e-39  # a bfloat16 subnormal
    metrics = verified_reload(
        _KernelEngine(), list(weights.items()), dtype=torch.bfloat16, version=1
    )
    assert metrics["sync/verified"] == 1.0
    changed = dict(weights)
    changed["attn.v_proj.weight"] = changed["attn.v_proj.weight"].clone()
    changed["attn.v_proj.weight"][0, 0] += 1.0  # a real change in the kernel-held weight
    engine = _KernelEngine()
    stream = RecordedStream(
        list(weights.items()), dtype=torch.bfloat16, engine_name=engine.engine_name()
    )
    list(stream)
    engine.reload_weights(changed.items())
    assert stream.problem(engine.held_sums()) == (
        "1 of 2 tensor(s) differ from what was sent (first: 'attn.qkv_proj.weight')"
    )
    held_as_is = dict(weights)  # the embeddings are compared bit for bit: -0.0 is not +0.0
    held_as_is["embed.weight"] = held_as_is["embed.weight"].clone()
    held_as_is["embed.weight"][0, 0] = -0.0
    stream = RecordedStream(
        list(held_as_is.items()), dtype=torch.bfloat16, engine_name=engine.engine_name()
    )
    list(stream)
    positive = dict(held_as_is)
    positive["embed.weight"] = positive["embed.weight"].clone()
    positive["embed.weight"][0, 0] = 0.0
    engine.reload_weights(positive.items())
    assert stream.problem(engine.held_sums()) == (
        "1 of 2 tensor(s) differ from what was sent (first: 'embed.weight')"
    )
