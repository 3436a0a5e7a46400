"""Fixtures of the vLLM rollout tests: one actor and one vLLM engine per session.

Building an engine costs seconds (the first import of vLLM most of them), so
the engine on the default task's model is shared by every test that only
reads it; tests that change weights restore them at the end.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

from hfsdk import default_task_assets, load_tokenizer
from hfsdk.core.batch import Batch

os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")

PROMPTS = ["3 + 4 =", "1 + 2 =", "9 + 9 =", "0 + 7 =", "5 + 5 =", "8 + 1 ="]


def build_llama(
    directory: Path, *, hidden: int = 512, layers: int = 8, heads: int = 8, tied: bool = False
) -> Path:
    """A randomly initialised Llama with the default task's tokenizer (about 30M parameters;
    ``tied``: the LM head is the input embeddings, as Qwen2.5-0.5B's)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from hfsdk import default_task_assets, load_tokenizer

    tokenizer = load_tokenizer(default_task_assets().model_dir)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=hidden * 11 // 4,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=256,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=tied,
    )
    LlamaForCausalLM(config).save_pretrained(str(directory))
    tokenizer.save_pretrained(str(directory))
    return directory


def train_step(actor, batch: Batch) -> dict[str, float]:
    """One policy-gradient update that pushes up whatever was sampled (moves greedy outputs)."""
    from hfsdk import get_registry
    from hfsdk_backend_common.objectives import ActorObjective

    loss = get_registry("policy_losses")["ppo_clip"]
    batch = batch.union(actor.compute_log_prob(batch))
    advantages = torch.randn(len(batch), 1).expand_as(batch["response_mask"]).contiguous()
    batch["advantages"] = advantages * batch["response_mask"]
    objective = ActorObjective(policy_loss=loss.impl, policy_loss_config=loss.config_cls())
    return actor.update_actor(batch, objective)


@pytest.fixture(scope="session")
def default_model_dir() -> Path:
    """The default task's warm-started model (shared cache)."""
    return default_task_assets().model_dir


@pytest.fixture(scope="session")
def make_prompts(default_model_dir: Path) -> Callable[[list[str]], Batch]:
    """``make_prompts(texts)``: a left-padded prompt batch with ``uid`` and ``raw_prompt``."""
    tokenizer = load_tokenizer(default_model_dir)

    def make(texts: list[str]) -> Batch:
        encoded = tokenizer(texts, return_tensors="pt", padding=True)
        return Batch.from_dict(
            tensors={"input_ids": encoded.input_ids, "attention_mask": encoded.attention_mask},
            non_tensors={"raw_prompt": texts, "uid": [f"p{i}" for i in range(len(texts))]},
        )

    return make


def build_actor(model_dir: Path | None = None, **overrides: object):
    """An (unsharded) actor engine on ``model_dir`` (default: the default task's model)."""
    from hfsdk_backend_common.optim_config import OptimConfig
    from hfsdk_backend_fsdp.fsdp_backend import FSDPBackend
    from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig

    config = FSDPRoleConfig(
        model_path=str(model_dir) if model_dir else None,
        device="cpu",
        optim=OptimConfig(lr=5e-3),
        mini_batch_size=64,
        micro_batch_size=64,
        **overrides,
    )
    return FSDPBackend.create_engine("actor", config, kind="actor")


@pytest.fixture(scope="session")
def actor():
    """The default task's actor engine, shared (tests that train it restore its state)."""
    return build_actor()


@pytest.fixture(scope="session")
def vllm_rollout(actor):
    """A vLLM rollout on the shared actor (one engine for the whole session)."""
    from hfsdk_rollout_vllm.vllm_config import VLLMRolloutConfig
    from hfsdk_rollout_vllm.vllm_rollout import VLLMRollout

    return VLLMRollout(VLLMRolloutConfig(max_response_length=8, temperature=1.0), actor)


@pytest.fixture(scope="session")
def hf_rollout(actor):
    """The reference implementation: HF ``generate`` on the same actor."""
    from hfsdk_backend_common.rollout.hf_rollout import HFRollout
    from hfsdk_backend_common.rollout_config import HFRolloutConfig

    return HFRollout(HFRolloutConfig(max_response_length=8, temperature=1.0), actor)


@pytest.fixture(autouse=True)
def _no_process_group_left() -> Iterator[None]:
    """The root conftest's check, off here: an in-process vLLM engine initialises
    torch.distributed (a one-rank group) for the life of the process, since its parallel
    state is global, and later engines in the process reuse it. Destroying it after the test
    that built the first engine breaks every engine after (``Invalid process group``)."""
    yield


@pytest.fixture(autouse=True)
def _seeded() -> Iterator[None]:
    """Every test samples from the same random state."""
    torch.manual_seed(0)
    yield


@pytest.fixture(scope="session")
def prompt_texts() -> list[str]:
    """Six default-task prompts of two widths (so the batch is left-padded)."""
    return list(PROMPTS)


@pytest.fixture(scope="session")
def helpers():
    """The module's helper functions for tests (conftest is not importable in importlib mode)."""
    import types

    return types.SimpleNamespace(
        build_llama=build_llama, train_step=train_step, build_actor=build_actor
    )
