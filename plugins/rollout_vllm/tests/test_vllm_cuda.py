"""The same rollout on a CUDA device: sleep/wake around training, reload, greedy == HF.

Needs a GPU and the ``gpu`` extra (``vllm``); skipped elsewhere. Not yet run:
the machines this was written on have no GPU.
"""

from __future__ import annotations

import pytest
import torch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


def test_cuda_engine_sleeps_reloads_and_matches_hf(make_prompts, prompt_texts, helpers) -> None:
    from hfsdk_backend_common.rollout.hf_rollout import HFRollout
    from hfsdk_backend_common.rollout_config import HFRolloutConfig
    from hfsdk_rollout_vllm.vllm_config import VLLMRolloutConfig
    from hfsdk_rollout_vllm.vllm_rollout import VLLMRollout

    actor = helpers.build_actor(None, device="cuda")
    vllm = VLLMRollout(VLLMRolloutConfig(max_response_length=8, gpu_memory_utilization=0.3), actor)
    hf = HFRollout(HFRolloutConfig(max_response_length=8), actor)
    assert vllm.engine.sleep_enabled and not vllm.engine.on_cpu
    prompts = make_prompts(prompt_texts)

    before = vllm.generate_sequences(prompts, greedy=True)
    assert vllm.engine._asleep == {"weights", "kv_cache"}  # released while the actor trains
    assert torch.equal(
        before["responses"], hf.generate_sequences(prompts, greedy=True)["responses"]
    )

    helpers.train_step(actor, vllm.generate_sequences(prompts.repeat(8, interleave=True)))
    vllm.update_weights(actor)
    assert vllm.engine._asleep == {"kv_cache"}  # only the weights woke for the reload
    after = vllm.generate_sequences(prompts, greedy=True)
    assert torch.equal(after["responses"], hf.generate_sequences(prompts, greedy=True)["responses"])
    assert not torch.equal(after["responses"], before["responses"])
