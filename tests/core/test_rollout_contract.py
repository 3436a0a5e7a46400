"""The rollout contract: a third party's backend (``contract_rollout.py``) with either actor.

``GreedyRollout`` is written against ``hfsdk`` only and registered like a
plugin; built through ``hfsdk.build_rollout``, it generates what transformers
does on the same weights with the fsdp actor (one process) and the megatron
actor (tp = 2 over two gloo ranks, the collector's rows). ``build_rollout``
refuses an implementation that is not a ``RolloutBackend``, in one line.
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

    from hfsdk.testing import hf_greedy_responses

    hf = AutoModelForCausalLM.from_pretrained(str(model["path"])).eval()
    tok = model["tokenizer"]
    ids, mask = model["prompts"]["input_ids"], model["prompts"]["attention_mask"]
    return hf_greedy_responses(
        hf, ids, mask, width=WIDTH, eos=tok.eos_token_id, pad=tok.pad_token_id
    )


def test_a_third_party_rollout_works_with_the_fsdp_actor(model: dict[str, Any]) -> None:
    from hfsdk_backend_fsdp.actor import ActorEngine
    from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig

    plugin = _plugin()
    get_plugin_manager().pm.register(plugin, name="greedy_contract")
    actor = ActorEngine(FSDPRoleConfig(model_path=str(model["path"]), device="cpu"), role="actor")
    rollout = hfsdk.build_rollout(plugin.GreedyConfig(max_response_length=WIDTH), actor)
    assert isinstance(rollout, plugin.GreedyRollout)
    out = rollout.generate_sequences(hfsdk.Batch.from_dict(tensors=model["prompts"]))
    assert torch.equal(out["responses"], _reference(model))


@pytest.mark.distributed
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
