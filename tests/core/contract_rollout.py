"""A third party's rollout backend, written only against ``hfsdk``'s rollout contract.

What a newcomer writes from ``docs/plugin_hooks.md``: greedy decoding with
transformers ``generate`` on a module of the actor's architecture, loaded
from ``actor.hf_weights()`` at every call. It imports nothing of any
training backend, so it must work with the fsdp and the megatron actor alike.
Also the rank side of the megatron check in ``test_rollout_contract.py``.
"""

from __future__ import annotations

from typing import Any

import attrs
import torch

import hfsdk
from hfsdk import ActorSource, Batch, RolloutBackend, RolloutConfig


@attrs.frozen(kw_only=True)
class GreedyConfig(RolloutConfig):
    """The plugin's ``rollout`` section: its name and the response width."""

    backend: str = "greedy_contract"
    max_response_length: int = attrs.field(default=8, validator=attrs.validators.ge(1))


class GreedyRollout(RolloutBackend):
    """Greedy responses, ``config.max_response_length`` wide, from the actor's current weights."""

    collective = True  # hf_weights() is collective: every rank of the actor calls generate

    config: GreedyConfig

    def __init__(self, config: GreedyConfig, actor: ActorSource) -> None:
        super().__init__(config, actor)
        from transformers import AutoModelForCausalLM

        self.model = AutoModelForCausalLM.from_config(actor.hf_config).eval()

    def generate_sequences(self, prompts: Batch) -> Batch:
        """``responses`` (right-padded with the pad id) for the collecting ranks."""
        with torch.no_grad():
            state = {name: tensor.clone() for name, tensor in self.actor.hf_weights()}
            self.model.load_state_dict(state, strict=False)
            if self.actor.hf_config.tie_word_embeddings:
                self.model.tie_weights()
        if not self.actor.dp.collects:
            return prompts  # the worker drops non-collectors' outputs
        tokenizer = self.actor.tokenizer
        width = self.config.max_response_length
        ids = prompts["input_ids"]
        with torch.no_grad():
            out = self.model.generate(
                input_ids=ids,
                attention_mask=prompts["attention_mask"],
                max_new_tokens=width,
                do_sample=False,
                eos_token_id=tokenizer.eos_token_id,
                pad_token_id=tokenizer.pad_token_id,
            )[:, ids.shape[1] :]
        responses = torch.full((len(ids), width), tokenizer.pad_token_id, dtype=torch.long)
        responses[:, : out.shape[1]] = out
        for row in responses:  # padding after the first EOS, as every rollout returns
            hits = (row == tokenizer.eos_token_id).nonzero()
            if len(hits):
                row[hits[0, 0] + 1 :] = tokenizer.pad_token_id
        return Batch.from_dict(tensors={"responses": responses}, meta={"greedy": True})


@hfsdk.hookimpl
def hfsdk_register_rollout_backends(register: Any) -> None:
    """Register ``greedy_contract`` (the plugin a third party would ship)."""
    register("greedy_contract", GreedyRollout, config_cls=GreedyConfig)


def megatron(rank: int, world: int, path: str, prompts: dict, width: int) -> Any:
    """tp=2 megatron actor on two gloo ranks; the collector's responses."""
    import sys

    from hfsdk.core.plugin_manager import get_plugin_manager
    from hfsdk_backend_megatron.engine import MegatronEngine
    from hfsdk_backend_megatron.megatron_config import MegatronRoleConfig, ParallelConfig

    get_plugin_manager().pm.register(sys.modules[__name__], name="greedy_contract")

    engine = MegatronEngine(
        MegatronRoleConfig(model_path=path, device="cpu", parallel=ParallelConfig(tp=2)),
        role="actor",
        kind="actor",
    )
    rollout = hfsdk.build_rollout(GreedyConfig(max_response_length=width), engine)
    out = rollout.generate_sequences(Batch.from_dict(tensors=prompts))
    return out["responses"] if engine.dp.collects else None
