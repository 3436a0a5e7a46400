"""What both vLLM rollouts send the engine: sampling settings, requests, the weight stream.

Shared by :mod:`.vllm_rollout` (an engine reloaded from the actor's HF weights)
and :mod:`.hybrid_vllm` (an engine fed from generation shards), so neither
imports the other.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import torch

from hfsdk import HfsdkError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from hfsdk import ActorSource
    from hfsdk_rollout_vllm.engine import ColocatedEngine
    from hfsdk_rollout_vllm.vllm_config import VLLMRolloutConfig

LOG_PROB_KEY = "rollout_log_probs"
SEED_RANGE = 2**31 - 1
logger = logging.getLogger(__name__)


def engine_dtype(config: VLLMRolloutConfig, actor: ActorSource) -> torch.dtype:
    """The engine's dtype: the actor's compute dtype unless ``rollout.dtype`` names one."""
    return actor.compute_dtype if config.dtype == "auto" else getattr(torch, config.dtype)


def drain(weights: Iterator[Any]) -> None:
    """Consume the rest of a collective weight stream (this rank's part of its gathers)."""
    for _ in weights:
        pass


def stop_settings(stop_ids: list[int]) -> dict[str, Any]:
    """``SamplingParams`` settings that stop a request on ``stop_ids`` and on nothing else.

    vLLM would also stop on the model directory's eos ids (config.json's without a
    generation_config.json), which hfsdk's response mask and finish reasons may not count:
    the pad after them would be trained, or a stopped request reported as cut at its length.
    """
    return {"ignore_eos": True, "stop_token_ids": list(stop_ids)}


def sampling_params(
    config: VLLMRolloutConfig, eos_ids: list[int], greedy: bool, seed: int | None = None
) -> Any:
    """vLLM's ``SamplingParams`` for one request of a rollout configured by ``config``."""
    from vllm import SamplingParams

    common: dict[str, Any] = {
        "max_tokens": config.max_response_length,
        **stop_settings(eos_ids),
        "logprobs": 0,  # the sampled token's own log-prob
        "detokenize": False,
    }
    if greedy:
        return SamplingParams(temperature=0.0, **common)
    return SamplingParams(
        temperature=config.temperature,
        top_p=config.top_p,
        top_k=config.top_k if config.top_k > 0 else 0,
        seed=seed,
        **common,
    )


def generate_rows(
    engine: ColocatedEngine,
    config: VLLMRolloutConfig,
    eos_ids: list[int],
    pad_id: int,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    seeds: list[int],
    greedy: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded responses (B, R) and their tokens' log-probs for left-padded prompts.

    ``seeds[i]`` is row i's sampling seed (ignored when ``greedy``); rows go to
    the engine ``config.micro_batch_size`` at a time (all at once when 0).
    """
    width = config.max_response_length
    rows = len(input_ids)
    responses = torch.full((rows, width), pad_id, dtype=torch.long)
    log_probs = torch.zeros((rows, width), dtype=torch.float32)
    step = config.micro_batch_size or max(rows, 1)
    abort_unfinished(engine.llm.llm_engine)
    for start in range(0, rows, step):
        stop = min(start + step, rows)
        requests = [
            {"prompt_token_ids": row[m.bool()].tolist()}
            for row, m in zip(input_ids[start:stop], attention_mask[start:stop], strict=True)
        ]
        params = [sampling_params(config, eos_ids, greedy, seeds[i]) for i in range(start, stop)]
        outputs = engine.generate(requests, params)
        _check_outputs(outputs, requests)
        for offset, output in enumerate(outputs):
            completion = output.outputs[0]
            tokens = list(completion.token_ids)[:width]
            _check_ending(tokens, width, eos_ids)
            row = start + offset
            responses[row, : len(tokens)] = torch.tensor(tokens, dtype=torch.long)
            for t, (token, entry) in enumerate(
                zip(tokens, completion.logprobs or [], strict=False)
            ):
                log_probs[row, t] = float(entry[token].logprob)
    return responses, log_probs


def abort_unfinished(llm_engine: Any) -> int:
    """Abort every request still unfinished in the engine; how many there were.

    vLLM's ``LLM.generate`` runs the engine until nothing is unfinished and returns every
    request that finished, sorted by id: a request left behind (by a request server whose
    event loop ended, say) would come first and take a row of the batch.
    """
    if not llm_engine.get_num_unfinished_requests():
        return 0
    # vLLM 0.32 lists the unfinished requests (internal ids) nowhere public but here.
    left = list(llm_engine.output_processor.request_states)
    llm_engine.abort_request(left, internal=True)
    logger.warning(
        "aborted %d unfinished request(s) left in the vLLM engine before a batch generation "
        "(abandoned by a request server whose event loop ended, or enqueued by another "
        "caller); their outputs would have taken the batch's rows",
        len(left),
    )
    return len(left)


def _check_outputs(outputs: list[Any], requests: list[dict[str, Any]]) -> None:
    """Raise unless vLLM returned one output per request, in the order sent."""
    sent = [r["prompt_token_ids"] for r in requests]
    got = [list(o.prompt_token_ids) for o in outputs]
    if got != sent:
        raise HfsdkError(
            f"vLLM returned {len(got)} outputs for the {len(sent)} prompts sent, or in another "
            "order (another caller drove the engine during the batch); their responses would "
            "land on the wrong rows: don't serve requests while generate_sequences runs"
        )


def _check_ending(tokens: list[int], width: int, eos_ids: list[int]) -> None:
    """Raise when a completion ends early on a token hfsdk's response mask does not stop at.

    The mask is rebuilt from ``eos_ids`` (``assemble_rollout``): the pad after such an
    ending would be trained as response tokens with zero rollout log-probs.
    """
    if len(tokens) < width and (not tokens or tokens[-1] not in eos_ids):
        last = tokens[-1] if tokens else None
        raise HfsdkError(
            f"vLLM ended a response after {len(tokens)} of {width} tokens on token {last}, "
            f"which is not one of hfsdk's EOS ids {eos_ids}; its padding would be trained: "
            "set eos_token_id in the model's generation_config.json to the ids it stops on"
        )
