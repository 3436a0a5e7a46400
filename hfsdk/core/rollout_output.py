"""The rollout contract's output batch: how every rollout backend builds it, and how ranks' merge.

A rollout backend (:class:`hfsdk.core.rollout_contract.RolloutBackend`) returns,
for left-padded prompts already repeated once per response, a batch with
``prompts``, ``responses`` (right-padded, nothing after the first EOS),
``input_ids``, ``attention_mask``, ``position_ids``, ``response_mask``, the
prompts' non-tensor columns plus ``response_text``, and ``meta``
``temperature``, ``greedy`` and ``rollout_metrics``. :func:`assemble_rollout`
builds all of it from the prompts and the generated tokens, so a backend only
generates.

When the worker collects the outputs of several data-parallel ranks, their
``meta['rollout_metrics']`` are reduced by :func:`merge_rollout_metrics` (each
metric's mean over the ranks, weighted by their rows) before the outputs are
concatenated: a backend need not agree its metrics across ranks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from hfsdk.core.errors import HfsdkError

if TYPE_CHECKING:
    import torch

    from hfsdk.core.batch import Batch

ROLLOUT_METRICS = "rollout_metrics"
"""The meta key of a rollout's metrics (name -> number), logged with the step's metrics."""


def eos_token_ids(configured: int | list[int] | None, tokenizer: Any) -> list[int]:
    """The ids that end a response: the generation config's ``eos_token_id`` and the tokenizer's."""
    ids: set[int] = set()
    if isinstance(configured, int):
        ids.add(configured)
    elif configured:
        ids.update(configured)
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    if not ids:
        raise HfsdkError(
            "neither the model's generation config nor the tokenizer names an EOS token; "
            "responses could never end — set eos_token_id in generation_config.json"
        )
    return sorted(ids)


def response_mask_from_eos(responses: torch.Tensor, eos_ids: Sequence[int]) -> torch.Tensor:
    """1 on every token up to and including the first EOS (all of them without one), else 0."""
    import torch

    is_eos = torch.isin(responses, torch.tensor(list(eos_ids), device=responses.device))
    eos_before = (is_eos.long().cumsum(dim=-1) - is_eos.long()) > 0
    return (~eos_before).float()


def position_ids_from_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """Positions counting only attended tokens (left padding gets position 0)."""
    return (attention_mask.long().cumsum(dim=-1) - 1).clamp(min=0)


def assemble_rollout(
    prompts: Batch,
    responses: torch.Tensor,
    *,
    tokenizer: Any,
    eos_ids: Sequence[int],
    temperature: float,
    greedy: bool,
    metrics: Mapping[str, float] | None = None,
    extra: Mapping[str, torch.Tensor] | None = None,
) -> Batch:
    """The rollout contract's output batch from left-padded prompts and right-padded responses.

    ``prompts`` already holds one row per response (``input_ids``,
    ``attention_mask`` and any non-tensor columns, which are kept); ``responses``
    is ``(rows, max_response_length)``. Whatever follows a response's first EOS
    becomes the pad id; ``extra`` per-token ``(rows, R)`` columns (e.g.
    ``rollout_log_probs``) are zeroed where masked. ``temperature`` is what the
    tokens were sampled at (1 for greedy), for the log-prob computation.
    """
    import torch

    from hfsdk.core.batch import Batch

    if responses.shape[0] != len(prompts):
        raise HfsdkError(
            f"assemble_rollout: {responses.shape[0]} responses for {len(prompts)} prompt rows; "
            "repeat each prompt once per response first (prompts.repeat(n, interleave=True))"
        )
    pad = tokenizer.pad_token_id
    responses = responses.long()
    response_mask = response_mask_from_eos(responses, eos_ids)
    responses = torch.where(response_mask.bool(), responses, torch.full_like(responses, pad))
    prompt_ids = prompts["input_ids"]
    attention_mask = torch.cat([prompts["attention_mask"].long(), response_mask.long()], dim=1)
    texts = tokenizer.batch_decode(
        [row[mask.bool()].tolist() for row, mask in zip(responses, response_mask, strict=True)],
        skip_special_tokens=True,
    )
    non_tensors = {k: prompts[k] for k in prompts.non_tensor_keys}
    non_tensors["response_text"] = texts
    masked_extra = {k: v * response_mask.to(v.dtype) for k, v in (extra or {}).items()}
    return Batch.from_dict(
        tensors={
            **masked_extra,
            "prompts": prompt_ids,
            "responses": responses,
            "input_ids": torch.cat([prompt_ids, responses], dim=1),
            "attention_mask": attention_mask,
            "position_ids": position_ids_from_mask(attention_mask),
            "response_mask": response_mask,
        },
        non_tensors=non_tensors,
        meta={
            **prompts.meta,
            "temperature": temperature,
            "greedy": greedy,
            ROLLOUT_METRICS: dict(metrics or {}),
        },
    )


def merge_rollout_metrics(outputs: Sequence[Batch]) -> list[Batch]:
    """``outputs`` with one ``meta['rollout_metrics']``: each metric's row-weighted mean.

    Several ranks' (or pieces') rollout outputs are about to be concatenated,
    and concatenation requires equal meta. Each rank measured its own share
    (its generation time, its bytes received), so every metric becomes the
    mean over the outputs that report it, weighted by their rows. Outputs
    without the key, or all with equal metrics, are returned as they are.
    """
    reported = [(len(b), b.meta[ROLLOUT_METRICS]) for b in outputs if ROLLOUT_METRICS in b.meta]
    if not reported or all(m == reported[0][1] for _, m in reported):
        return list(outputs)
    sums: dict[str, float] = {}
    weights: dict[str, int] = {}
    plain: dict[str, list[float]] = {}  # for a metric only empty outputs report
    for rows, metrics in reported:
        if not isinstance(metrics, Mapping):
            raise HfsdkError(
                f"meta[{ROLLOUT_METRICS!r}] is a {type(metrics).__name__}; a rollout reports "
                "its metrics as a dict of name -> number"
            )
        for key, value in metrics.items():
            try:
                number = float(value)
            except (TypeError, ValueError):
                raise HfsdkError(
                    f"meta[{ROLLOUT_METRICS!r}][{key!r}] is {value!r}; a rollout's metrics "
                    "must be numbers"
                ) from None
            sums[key] = sums.get(key, 0.0) + number * rows
            weights[key] = weights.get(key, 0) + rows
            plain.setdefault(key, []).append(number)
    merged = {
        key: sums[key] / weights[key] if weights[key] else sum(plain[key]) / len(plain[key])
        for key in sorted(sums)
    }
    out = []
    for batch in outputs:
        if ROLLOUT_METRICS in batch.meta:
            batch = batch.select()  # shares the data; its own meta
            batch.meta[ROLLOUT_METRICS] = dict(merged)
        out.append(batch)
    return out
