"""The rollout contract: a third party's backend (``contract_rollout.py``) with either actor.

``SamplingRollout`` (the worked example of ``docs/plugin_hooks.md``, run as
written) is written against ``hfsdk`` only and registered like a plugin; built
through ``hfsdk.build_rollout``, asked for greedy responses it generates what
transformers does on the same weights with the fsdp actor (one process) and
the megatron actor (tp = 2 over two gloo ranks, the collector's rows). Asked
for ``meta['n']`` samples per prompt it returns the whole contract batch,
``n`` consecutive rows per prompt, sampled from softmax(logits / temperature).
``build_rollout`` refuses an implementation that is not a ``RolloutBackend``,
in one line.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import torch

import hfsdk
from hfsdk import HfsdkError
from hfsdk.core.plugin_manager import get_plugin_manager

pytest.importorskip("hfsdk_backend_fsdp")
pytest.importorskip("hfsdk_backend_megatron")

HERE = str(Path(__file__).parent)
PROMPTS = ["3 + 5 =", "1 + 2 + 3 =", "9 + 9 ="]
WIDTH = 6
# The example registers itself as a plugin: each test starts from the installed ones.
pytestmark = pytest.mark.usefixtures("fresh_plugin_manager")


def _plugin() -> Any:
    import importlib

    if HERE not in sys.path:
        sys.path.insert(0, HERE)
    return importlib.import_module("contract_rollout")


@pytest.fixture(scope="module")
def model(tp2_tiny_llama: tuple[Path, Any]) -> dict[str, Any]:
    """The tp-2 tiny Llama, its tokenizer and left-padded prompts."""
    import copy

    path, tokenizer = tp2_tiny_llama
    tokenizer = copy.deepcopy(tokenizer)  # the session's copy keeps its padding side
    tokenizer.padding_side = "left"
    encoded = tokenizer(PROMPTS, return_tensors="pt", padding=True)
    prompts = {"input_ids": encoded.input_ids, "attention_mask": encoded.attention_mask}
    return {"path": path, "tokenizer": tokenizer, "prompts": prompts}


def _reference(model: dict[str, Any]) -> torch.Tensor:
    from transformers import AutoModelForCausalLM

    from hfsdk_testing import hf_greedy_responses

    hf = AutoModelForCausalLM.from_pretrained(str(model["path"])).eval()
    tok = model["tokenizer"]
    ids, mask = model["prompts"]["input_ids"], model["prompts"]["attention_mask"]
    return hf_greedy_responses(
        hf, ids, mask, width=WIDTH, eos=tok.eos_token_id, pad=tok.pad_token_id
    )


def test_a_third_party_rollout_works_with_the_fsdp_actor(model: dict[str, Any]) -> None:
    rollout = _fsdp_rollout(model, max_response_length=WIDTH)
    prompts = hfsdk.Batch.from_dict(tensors=model["prompts"], meta={"greedy": True})
    out = rollout.generate_sequences(prompts)
    assert torch.equal(out["responses"], _reference(model))
    assert out.meta["greedy"] is True and out.meta["temperature"] == 1.0


def _fsdp_rollout(model: dict[str, Any], **config: Any) -> Any:
    from hfsdk_backend_fsdp.actor import ActorEngine
    from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig

    plugin = _plugin()
    get_plugin_manager().pm.register(plugin, name="sampling_contract")
    actor = ActorEngine(FSDPRoleConfig(model_path=str(model["path"]), device="cpu"), role="actor")
    rollout = hfsdk.build_rollout(plugin.SamplingConfig(**config), actor)
    assert isinstance(rollout, plugin.SamplingRollout)
    return rollout


CONTRACT_KEYS = {
    "prompts", "responses", "input_ids", "attention_mask", "position_ids", "response_mask",
}  # fmt: skip


def test_the_example_returns_n_sampled_responses_per_prompt(model: dict[str, Any]) -> None:
    rollout = _fsdp_rollout(model, max_response_length=WIDTH, temperature=1.5)
    n = 4
    prompts = hfsdk.Batch.from_dict(
        tensors=model["prompts"], non_tensors={"uid": ["a", "b", "c"]}, meta={"n": n}
    )
    out = rollout.generate_sequences(prompts)
    assert set(out.tensor_keys) >= CONTRACT_KEYS and "response_text" in out.non_tensor_keys
    assert list(out["uid"]) == [u for u in "abc" for _ in range(n)]
    assert torch.equal(out["prompts"], model["prompts"]["input_ids"].repeat_interleave(n, 0))
    assert out.meta["temperature"] == 1.5 and out.meta["greedy"] is False
    groups = out["responses"].view(3, n, -1)
    assert any(len({tuple(r.tolist()) for r in group}) > 1 for group in groups)
    # whatever follows the first EOS is padding, and the masks agree with it
    mask = out["response_mask"].bool()
    assert torch.equal(out["attention_mask"][:, -WIDTH:].bool(), mask)
    assert (out["responses"][~mask] == model["tokenizer"].pad_token_id).all()


def test_the_example_samples_at_the_rollout_temperature(model: dict[str, Any]) -> None:
    """The first token's frequencies over many samples follow softmax(logits / T)."""
    from transformers import AutoModelForCausalLM

    temperature, samples = 2.0, 3000
    rollout = _fsdp_rollout(model, max_response_length=1, temperature=temperature)
    prompt = {k: v[:1] for k, v in model["prompts"].items()}
    torch.manual_seed(0)
    out = rollout.generate_sequences(hfsdk.Batch.from_dict(tensors=prompt, meta={"n": samples}))
    hf = AutoModelForCausalLM.from_pretrained(str(model["path"])).eval()
    with torch.no_grad():
        logits = hf(**prompt).logits[0, -1]
    vocab = logits.shape[0]
    seen = torch.bincount(out["responses"][:, 0], minlength=vocab).double() / samples
    tv = lambda p: 0.5 * float((seen - p).abs().sum())  # noqa: E731
    at_t = torch.softmax(logits.double() / temperature, -1)
    at_one = torch.softmax(logits.double(), -1)
    # sampling noise: E[TV] <= 0.5 * sum(sqrt(p (1 - p) / samples))
    noise = 0.5 * float((at_t * (1 - at_t) / samples).sqrt().sum())
    assert tv(at_t) < 3 * noise < tv(at_one), (tv(at_t), noise, tv(at_one))


@pytest.mark.distributed
@pytest.mark.heavy
def test_a_third_party_rollout_works_with_the_megatron_actor(model: dict[str, Any]) -> None:
    from hfsdk_backend_common.testing.launch import run_gloo

    kwargs = {"path": str(model["path"]), "prompts": model["prompts"], "width": WIDTH}
    outcomes = run_gloo(2, "contract_rollout:megatron", kwargs, path=[HERE], timeout=600)
    collected = [o for o in outcomes if o is not None]
    assert len(collected) == 1  # tp rank 0 of the one replica
    assert torch.equal(collected[0], _reference(model))


class _NotABackend:
    """A registered rollout that does not implement the contract."""


def test_build_rollout_refuses_what_is_not_a_rollout_backend() -> None:
    from hfsdk import RolloutConfig

    class Plugin:
        @staticmethod
        @hfsdk.hookimpl
        def hfsdk_register_rollout_backends(register: Any) -> None:
            register("not_a_backend", _NotABackend, config_cls=RolloutConfig)

    get_plugin_manager().pm.register(Plugin, name="not_a_backend")
    with pytest.raises(HfsdkError) as info:
        hfsdk.build_rollout(RolloutConfig(backend="not_a_backend"), actor=None)  # type: ignore[arg-type]
    message = str(info.value)
    assert "not an hfsdk.RolloutBackend subclass" in message and "\n" not in message
