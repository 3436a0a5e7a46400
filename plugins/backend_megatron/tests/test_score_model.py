"""A ``score_model`` role on megatron: a reward/cost model trained with a pairwise loss.

One process, tp = pp = 1, a tiny sequence classifier: the first Bradley-Terry
loss equals the one computed from transformers' own scores, the updates are the
fsdp score model's, and a few steps lower the loss.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.nn import functional

import hfsdk
from hfsdk import Batch
from hfsdk_backend_common.optim_config import OptimConfig
from hfsdk_supervised_data import collate_preference_pairs, tokenize_preference_pairs
from hfsdk_testing import hf_sequence_scores

STEPS = 4


def _pair_loss(scores: torch.Tensor, micro: Batch) -> tuple[torch.Tensor, dict]:
    """Bradley-Terry on interleaved (chosen, rejected) rows: per-pair loss and accuracy."""
    diff = scores[0::2] - scores[1::2]
    return -functional.logsigmoid(diff), {"accuracy": (diff > 0).float()}


def _pairs(tokenizer: Any) -> Batch:
    rows = [
        {"prompt": f"{a} + {b} =", "chosen": str(a + b), "rejected": str((a + b + 3) % 19)}
        for a, b in [(1, 2), (3, 4), (5, 1), (2, 2), (0, 7), (6, 3)]
    ]
    pairs = tokenize_preference_pairs(rows, tokenizer, use_template=False)
    batch = collate_preference_pairs(pairs, tokenizer.pad_token_id)
    batch.meta[hfsdk.ROW_GROUP] = 2
    return batch


@pytest.fixture(scope="module")
def classifier(tmp_path_factory: pytest.TempPathFactory, save_tiny_llama: Callable) -> Path:
    """A tiny Llama sequence classifier (its score head included: both backends load it)."""
    from hfsdk import default_task_assets

    root = tmp_path_factory.mktemp("megatron-score-model")
    # The built-in task's tokenizer (already built); the model is this fixture's own.
    tokenizer_dir = default_task_assets().tokenizer_dir
    return save_tiny_llama(root / "rm", tokenizer_dir, head="score", seed=5)


def _losses(engine: Any, batch: Batch) -> list[float]:
    return [engine.update_score_model(batch, _pair_loss)["score_model/loss"] for _ in range(STEPS)]


# Adam's first steps move every weight by about lr, whatever the gradient's scale.
OPTIM = {"lr": 3e-3, "grad_clip": 1.0}


@pytest.mark.heavy  # builds a megatron engine in the test process (its process-wide state is
# destroyed by own_megatron_state; before that it broke later in-process runs in CI)
@pytest.mark.usefixtures("own_megatron_state")
def test_megatron_trains_a_score_model_like_fsdp_and_transformers(classifier: Path) -> None:
    from hfsdk_backend_megatron.engine import MegatronEngine
    from hfsdk_backend_megatron.megatron_config import MegatronRoleConfig

    common = dict(model_path=str(classifier), micro_batch_size=4, mini_batch_size=12, shuffle=False)
    megatron = MegatronEngine(
        MegatronRoleConfig(**common, optim=OptimConfig(**OPTIM)),
        role="reward_model",
        kind="score_model",
        total_steps=STEPS,
    )
    batch = _pairs(megatron.tokenizer)
    hf = hf_sequence_scores(classifier, batch)
    before = megatron.compute_scores(batch)["rm_scores"]
    # Scores of a 32-wide float32 model, another kernel order than transformers': 1e-5
    # (measured: 1.8e-6 at most).
    torch.testing.assert_close(before, hf, rtol=1e-5, atol=1e-5)
    hand = float(-functional.logsigmoid(hf[0::2] - hf[1::2]).mean())
    got = _losses(megatron, batch)
    # The first loss is taken before any update: a mean of 6 logsigmoids of those scores.
    assert got[0] == pytest.approx(hand, rel=1e-5, abs=1e-6)

    from hfsdk_backend_fsdp.engine_factory import create_engine
    from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig

    fsdp = create_engine(
        "reward_model",
        FSDPRoleConfig(**common, optim=OptimConfig(**OPTIM)),
        kind="score_model",
        total_steps=STEPS,
    )
    expected = _losses(fsdp, batch)
    # The same AdamW steps on the same gradients: float32 rounding of two kernel orders,
    # carried through three updates (measured: 1.6e-6 relative at most).
    assert got == pytest.approx(expected, rel=1e-4, abs=1e-6)
    # Four steps on six pairs lower the loss (measured: 0.664, 0.323, 0.139, 0.040).
    assert got[-1] < got[0] - 0.05, got


@pytest.mark.heavy  # builds megatron engines in the test process, as the test above
@pytest.mark.usefixtures("own_megatron_state")
def test_a_frozen_bfloat16_scorer_scores_like_float32(classifier: Path) -> None:
    """A frozen reward model at dtype bfloat16: the body was bfloat16 but the score head
    float32, so the first compute_scores died in F.linear ("expected m1 and m2 to have the
    same dtype"). The head now takes the model's dtype, as the fsdp backend loads it."""
    from hfsdk_backend_megatron.engine import MegatronEngine
    from hfsdk_backend_megatron.megatron_config import MegatronRoleConfig

    def scores(dtype: str) -> torch.Tensor:
        config = MegatronRoleConfig(model_path=str(classifier), dtype=dtype)
        engine = MegatronEngine(config, role="reward", kind="score")
        out = engine.compute_scores(_pairs(engine.tokenizer))["rm_scores"]
        assert engine.model.output_layer.weight.dtype == engine.dtype
        return out

    full, half = scores("float32"), scores("bfloat16")
    assert half.dtype == torch.float32  # scores leave the engine in float32 either way
    # bfloat16 keeps 8 mantissa bits (~4e-3 relative) per op, over two tiny layers
    # (measured: 2.3e-2 at most, on scores up to 1.4).
    torch.testing.assert_close(half, full, rtol=3e-2, atol=3e-2)
