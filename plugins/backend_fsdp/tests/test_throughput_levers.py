"""The work the actor skips gives the same numbers as the work it used to do.

Padding columns dropped and logits computed for response positions only
(``remove_padding``, ``logits_to_keep``), the entropy reported without a
graph, and the old log-probs replaced by the detached current ones when the
update is exactly on-policy.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from hfsdk import HfsdkError
from hfsdk.core.batch import Batch
from hfsdk_backend_common.objectives import ActorObjective
from hfsdk_backend_common.optim_config import OptimConfig
from hfsdk_backend_common.rollout.hf_rollout import HFRollout
from hfsdk_backend_common.rollout_config import HFRolloutConfig
from hfsdk_backend_common.token_ops import padding_columns
from hfsdk_backend_fsdp.actor import ActorEngine
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig
from hfsdk_backend_fsdp.micro_batches import padded_cost, row_extents
from hfsdk_policy_losses.losses import ppo_clip_loss

COMPILED_PASSES_WORKER = Path(__file__).with_name("compiled_passes_worker.py")
COMPILE_STALL_S = 480
"""Seconds the compile check may take (about 60 cold here) before its process dumps its stacks."""
PROMPTS = ["3 + 5 =", "1 + 2 + 3 + 4 =", "9 + 9 =", "4 + 0 ="]
LR = 1e-3
COMPARABLE = OptimConfig(lr=LR, eps=1.0)
"""The optimizer of updates compared with each other.

AdamW's first step moves a weight by lr·g/(|g| + eps). At the default eps
(1e-8) that is ±lr for a gradient element near zero, whose sign float
rounding decides: two updates whose sums run in another order (other passes,
another CPU's kernels) can differ there by up to 2·lr, whatever the code.
With eps = 1 the step is Lipschitz in g with constant lr, so weights differ by
lr × the gradients' rounding difference (:func:`_assert_same_weights`).
"""


def _assert_same_weights(a: ActorEngine, b: ActorEngine, tokens: int, steps: int = 1) -> None:
    """``b``'s weights equal ``a``'s up to float32 reduction order after ``steps`` updates.

    A clipped gradient element (grad_clip 1, so at most 1) sums per-token
    terms; another order changes it by about ``tokens`` · u (u = float32 eps),
    and the forward/backward roundings feeding each term add a few u more
    (factor 8). Each of the ``steps`` COMPARABLE steps turns that into
    lr × it; the weights' own rounding is rtol 2·u. (Measured: 1.9e-9 against
    this bound's 6.9e-8 for 72 tokens; a wrong loss scale or a lost pass moves
    the weights by ~1e-4.)
    """
    _assert_same_parameters(
        dict(a.module.named_parameters()), dict(b.module.named_parameters()), tokens, steps
    )


def _assert_same_parameters(
    a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], tokens: int, steps: int = 1
) -> None:
    """:func:`_assert_same_weights` on named parameters."""
    u = torch.finfo(torch.float32).eps
    atol = steps * LR * 8 * tokens * u
    assert list(b) == list(a)
    for name, x in a.items():
        torch.testing.assert_close(b[name], x, atol=atol, rtol=2 * u, msg=name)


def _actor(model_dir: Path, **overrides: object) -> ActorEngine:
    settings: dict[str, object] = {
        "model_path": str(model_dir),
        "mini_batch_size": 8,
        "micro_batch_size": 4,
        "optim": OptimConfig(lr=1e-3),
        **overrides,
    }
    return ActorEngine(FSDPRoleConfig(**settings), role="actor")  # type: ignore[arg-type]


@pytest.fixture
def sampled(model_dir: Path, make_prompts: Callable[..., Batch]) -> Batch:
    """8 responses (up to 10 tokens) to prompts of different lengths, with advantages."""
    torch.manual_seed(0)
    rollout = HFRollout(
        HFRolloutConfig(max_response_length=10, n=2, temperature=0.7), _actor(model_dir)
    )
    batch = rollout.generate_sequences(make_prompts(PROMPTS))
    batch["advantages"] = torch.randn(len(batch), 1) * batch["response_mask"]
    return batch


def test_padding_columns_finds_the_columns_every_row_needs() -> None:
    attention = torch.tensor([[0, 0, 1, 1, 1, 1, 0, 0], [0, 1, 1, 1, 1, 0, 0, 0]])
    response = attention[:, 4:]
    assert padding_columns(attention, response) == (1, 2)
    nothing = torch.zeros(2, 3)
    assert padding_columns(torch.ones(2, 7), nothing) == (0, 1)


def test_trimmed_response_only_forward_matches_the_full_one(
    model_dir: Path, sampled: Batch
) -> None:
    lean = _actor(model_dir)
    full = _actor(model_dir, remove_padding=False)
    full._logits_to_keep = False  # the old path: logits for every position
    assert lean._logits_to_keep  # Llama accepts logits_to_keep
    mask = sampled["response_mask"]
    # The second micro-batch (two short prompts) has padding to drop on both sides.
    first, kept = padding_columns(sampled["attention_mask"][4:], mask[4:])
    assert first > 0 and kept < mask.shape[1]
    out_lean, out_full = lean.compute_log_prob(sampled), full.compute_log_prob(sampled)
    for key in ("old_log_probs", "entropys"):
        torch.testing.assert_close(out_lean[key], out_full[key], atol=1e-5, rtol=1e-4)
    assert out_lean["old_log_probs"][mask == 0].eq(0).all()


def test_on_policy_update_without_old_log_probs_is_the_same_step(
    model_dir: Path, sampled: Batch
) -> None:
    objective = ActorObjective(policy_loss=ppo_clip_loss)
    given, derived = _actor(model_dir, optim=COMPARABLE), _actor(model_dir, optim=COMPARABLE)
    with_old = sampled.union(given.compute_log_prob(sampled))
    metrics_given = given.update_actor(with_old, objective)
    metrics_derived = derived.update_actor(sampled, objective)
    for name in ("actor/pg_loss", "actor/entropy", "actor/grad_norm"):
        assert metrics_derived[name] == pytest.approx(metrics_given[name], rel=1e-4, abs=1e-6)
    assert metrics_derived["actor/ppo_kl"] == 0.0 and metrics_derived["actor/pg_clipfrac"] == 0.0
    _assert_same_weights(given, derived, int(sampled["attention_mask"].sum()))


def test_off_policy_update_without_old_log_probs_computes_them_first(
    model_dir: Path, sampled: Batch
) -> None:
    objective = ActorObjective(policy_loss=ppo_clip_loss)
    settings = {"mini_batch_size": 4, "micro_batch_size": 4, "optim": COMPARABLE}  # two steps
    given, derived = _actor(model_dir, **settings), _actor(model_dir, **settings)
    with_old = sampled.union(given.compute_log_prob(sampled))
    given.update_actor(with_old, objective)
    metrics = derived.update_actor(sampled, objective)
    assert metrics["actor/ppo_kl"] != 0.0  # the second step saw a moved policy
    _assert_same_weights(given, derived, int(sampled["attention_mask"].sum()), steps=2)


def test_entropy_is_trained_only_with_a_bonus(model_dir: Path, sampled: Batch) -> None:
    sampled = sampled.union(_actor(model_dir).compute_log_prob(sampled))
    sampled["advantages"] = torch.zeros_like(sampled["response_mask"])
    plain, bonus = _actor(model_dir), _actor(model_dir)
    plain.update_actor(sampled, ActorObjective(policy_loss=ppo_clip_loss))
    bonus.update_actor(sampled, ActorObjective(policy_loss=ppo_clip_loss, entropy_coef=0.1))
    # Zero advantages: without the bonus nothing moves the weights; with it they change.
    moved = [
        float((a - b).detach().abs().max())
        for a, b in zip(plain.module.parameters(), bonus.module.parameters(), strict=True)
    ]
    assert max(moved) > 1e-5


def test_token_budget_passes_train_and_score_like_fixed_row_counts(
    model_dir: Path, sampled: Batch
) -> None:
    objective = ActorObjective(policy_loss=ppo_clip_loss)
    sampled = sampled.union(_actor(model_dir).compute_log_prob(sampled))
    lengths = sampled["attention_mask"].sum(dim=-1).tolist()
    budget = int(2 * max(lengths))  # two of the longest rows, or more of the short ones
    rows = _actor(model_dir, optim=COMPARABLE)
    tokens = _actor(model_dir, optim=COMPARABLE, micro_batch_tokens=budget)
    passes: list[Batch] = []
    split = tokens._train_micro_batches

    def recorded(mini: Batch) -> list[Batch]:
        passes.extend(split(mini))
        return split(mini)

    tokens._train_micro_batches = recorded  # type: ignore[method-assign]
    metrics_rows = rows.update_actor(sampled, objective)
    metrics_tokens = tokens.update_actor(sampled, objective)
    # The budget shaped the passes: none over it at the width it runs at (longest prompt +
    # longest response), and not the fixed 4 + 4 rows.
    width = sampled["responses"].shape[1]
    for p in passes:
        extents = row_extents(p["attention_mask"], width)
        assert padded_cost(extents, range(len(p))) <= budget
    assert [len(p) for p in passes] != [4, 4]
    for name in ("actor/pg_loss", "actor/kl", "actor/grad_norm"):
        if name in metrics_rows:
            assert metrics_tokens[name] == pytest.approx(metrics_rows[name], rel=1e-4, abs=1e-6)
    _assert_same_weights(rows, tokens, int(sampled["attention_mask"].sum()))
    start = _actor(model_dir)
    moved = max(
        float((x - y).detach().abs().max())
        for x, y in zip(start.module.parameters(), rows.module.parameters(), strict=True)
    )
    assert moved > 1e-5  # the compared updates did move the weights
    # Inference passes take consecutive rows, so the outputs keep the batch's order.
    torch.testing.assert_close(
        tokens.compute_log_prob(sampled)["old_log_probs"],
        rows.compute_log_prob(sampled)["old_log_probs"],
        atol=1e-5,
        rtol=1e-4,
    )


def test_token_budgets_price_each_pass_at_the_width_it_runs(model_dir: Path) -> None:
    """The budget assumed every pass drops its padding columns; the critic, the scorers and
    an actor with remove_padding false run at the batch's full width, so their passes ran
    ~6x over micro_batch_tokens (a critic pass of 497 tokens for a budget of 80)."""
    from hfsdk_backend_fsdp.critic import CriticEngine
    from hfsdk_backend_fsdp.scorer import ScoreEngine

    prompt, response, budget = 12, 6, 40
    attention = torch.zeros(6, prompt + response, dtype=torch.long)
    attention[0] = 1  # one long prompt: every row runs this wide unless columns are dropped
    attention[1:, prompt - 2 : prompt + 3] = 1
    batch = Batch.from_dict(
        tensors={
            "input_ids": torch.full_like(attention, 5),
            "attention_mask": attention,
            "responses": torch.full((6, response), 5),
            "response_mask": attention[:, prompt:].clone(),
        }
    )
    settings = {"model_path": str(model_dir), "micro_batch_tokens": budget}
    full_width = [
        CriticEngine(FSDPRoleConfig(**settings), role="critic"),  # type: ignore[arg-type]
        ScoreEngine(FSDPRoleConfig(**settings), role="reward"),  # type: ignore[arg-type]
        _actor(model_dir, micro_batch_tokens=budget, remove_padding=False),
    ]
    for engine in full_width:
        for passes in (
            list(engine._forward_micro_batches(batch)),
            engine._train_micro_batches(batch),
        ):
            assert sorted(len(p) for p in passes) == [2, 2, 2], type(engine).__name__
    # The actor that drops padding columns still lets the short rows share one pass.
    trimmed = _actor(model_dir, micro_batch_tokens=budget)
    assert sorted(len(p) for p in trimmed._train_micro_batches(batch)) == [2, 4]


def test_compile_without_a_cpp_compiler_is_refused_in_one_line(
    model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from torch._inductor.cpp_builder import cpp_compiler_search

    # Inductor caches the compiler it found; forget it so the search runs on this PATH.
    cpp_compiler_search.cache_clear()
    monkeypatch.setenv("PATH", "/nonexistent")
    try:
        with pytest.raises(HfsdkError, match=r"actor.compile=true: .*no C\+\+ compiler") as err:
            _actor(model_dir, compile=True)
    finally:
        cpp_compiler_search.cache_clear()
    assert "\n" not in str(err.value)


@pytest.mark.heavy
def test_compiled_passes_give_the_eager_numbers(
    model_dir: Path, sampled: Batch, tmp_path: Path
) -> None:
    """``compile: true`` runs the log-prob and training passes through inductor (about a
    minute of compiling here), with the eager passes' numbers up to reduction order.

    Both actors run in a fresh process (``compiled_passes_worker.py`` says why), which
    dumps its stacks and exits if it stalls, and compiles into a cache of its own: what
    is checked is the compile, not a graph another run left (one generated for another
    vector ISA aborted this check once: ``hfsdk_backend_common.compile_caches``).
    """
    torch.save(sampled, tmp_path / "batch.pt")
    command = [
        sys.executable,
        str(COMPILED_PASSES_WORKER),
        f"--model={model_dir}",
        f"--batch={tmp_path / 'batch.pt'}",
        f"--out={tmp_path / 'result.pt'}",
        f"--stall-after={COMPILE_STALL_S}",
    ]
    # One compile thread: inductor builds its kernels in this process, not a worker pool.
    env = {
        **os.environ,
        "TORCHINDUCTOR_COMPILE_THREADS": "1",
        "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"),
    }
    done = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=COMPILE_STALL_S + 60
    )
    assert done.returncode == 0, done.stderr[-6000:]
    result = torch.load(tmp_path / "result.pt", weights_only=False)
    assert result["compute_module_is_compiled"] and result["eager_module_is_plain"]
    assert result["new_graphs"] > 0  # the pass went through dynamo
    out = result["out"]
    for key in ("old_log_probs", "entropys"):
        torch.testing.assert_close(out["compiled"][key], out["eager"][key], atol=1e-5, rtol=1e-4)
    metrics = result["metrics"]
    for name in ("actor/pg_loss", "actor/grad_norm"):
        assert metrics["compiled"][name] == pytest.approx(
            metrics["eager"][name], rel=1e-4, abs=1e-6
        )
    weights = result["weights"]
    _assert_same_parameters(
        weights["eager"], weights["compiled"], int(sampled["attention_mask"].sum())
    )
