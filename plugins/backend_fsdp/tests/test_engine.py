"""What every engine shares: state dicts, checkpoints, HF export, batching rules."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import attrs
import pytest
import torch
from transformers import (
    AutoModelForCausalLM,
    AutoModelForTokenClassification,
    PreTrainedTokenizerFast,
)

from hfsdk.core.batch import Batch
from hfsdk.core.errors import HfsdkError
from hfsdk_backend_common.engine_support import MetricAccumulator
from hfsdk_backend_common.objectives import ActorObjective
from hfsdk_backend_common.optim_config import OptimConfig
from hfsdk_backend_common.rollout.hf_rollout import HFRollout
from hfsdk_backend_common.rollout_config import HFRolloutConfig
from hfsdk_backend_fsdp import engine as engine_module
from hfsdk_backend_fsdp.actor import ActorEngine
from hfsdk_backend_fsdp.critic import CriticEngine
from hfsdk_backend_fsdp.engine import resolve_model_path
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig
from hfsdk_backend_fsdp.sharding import DataParallel
from hfsdk_policy_losses.losses import reinforce_loss


def _config(model_dir: Path) -> FSDPRoleConfig:
    return FSDPRoleConfig(
        model_path=str(model_dir),
        mini_batch_size=4,
        micro_batch_size=2,
        optim=OptimConfig(lr=1e-3, warmup_steps=3),
    )


@pytest.fixture
def train_batch(model_dir: Path, make_prompts: Callable[..., Batch]) -> Batch:
    """8 responses with old log-probs and random advantages."""
    torch.manual_seed(0)
    actor = ActorEngine(_config(model_dir), role="actor")
    batch = HFRollout(HFRolloutConfig(max_response_length=4, n=2), actor).generate_sequences(
        make_prompts(["3 + 5 =", "1 + 2 =", "9 + 9 =", "4 + 0 ="])
    )
    batch = batch.union(actor.compute_log_prob(batch))
    batch["advantages"] = torch.randn(8, 1) * batch["response_mask"]
    return batch


def _same_params(a: torch.nn.Module, b: torch.nn.Module) -> None:
    for (name, x), (_, y) in zip(a.named_parameters(), b.named_parameters(), strict=True):
        torch.testing.assert_close(x, y, msg=name)


def test_state_dict_round_trip_continues_identically(model_dir: Path, train_batch: Batch) -> None:
    objective = ActorObjective(policy_loss=reinforce_loss)
    original = ActorEngine(_config(model_dir), role="actor")
    original.update_actor(train_batch, objective)
    state = original.state_dict()
    assert set(state) == {"model", "optimizer", "optimizer_unstepped", "scheduler", "update_calls"}
    restored = ActorEngine(_config(model_dir), role="actor")
    restored.load_state_dict(state)
    _same_params(original.module, restored.module)
    assert restored.update_calls == 1
    # The next step (Adam moments and the warmup lr included) is the same too.
    first = original.update_actor(train_batch, objective)
    second = restored.update_actor(train_batch, objective)
    assert second["actor/lr"] == first["actor/lr"] == pytest.approx(2e-3 / 3)
    _same_params(original.module, restored.module)
    with pytest.raises(HfsdkError, match="lacks"):
        restored.load_state_dict({"model": state["model"], "update_calls": 1})


def test_checkpoint_files_round_trip(model_dir: Path, train_batch: Batch, tmp_path: Path) -> None:
    objective = ActorObjective(policy_loss=reinforce_loss)
    original = ActorEngine(_config(model_dir), role="actor")
    original.update_actor(train_batch, objective)
    path = original.save_checkpoint(tmp_path / "ckpt")
    assert path == tmp_path / "ckpt" / "actor_dcp" and (path / ".metadata").is_file()
    restored = ActorEngine(_config(model_dir), role="actor")
    restored.load_checkpoint(tmp_path / "ckpt")
    original.update_actor(train_batch, objective)
    restored.update_actor(train_batch, objective)
    _same_params(original.module, restored.module)
    with pytest.raises(HfsdkError, match="no actor engine checkpoint"):
        restored.load_checkpoint(tmp_path / "missing")


def test_exported_actor_reloads_with_the_same_logits(
    model_dir: Path, train_batch: Batch, tmp_path: Path
) -> None:
    actor = ActorEngine(_config(model_dir), role="actor")
    actor.update_actor(train_batch, ActorObjective(policy_loss=reinforce_loss))
    out = actor.export_hf(tmp_path / "hf")
    reloaded = AutoModelForCausalLM.from_pretrained(str(out))
    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(out))
    assert tokenizer("3 + 5 =").input_ids == actor.tokenizer("3 + 5 =").input_ids
    assert (out / "generation_config.json").exists()
    ids = train_batch["input_ids"]
    with torch.no_grad():
        expected = actor.module(input_ids=ids).logits
        got = reloaded(input_ids=ids).logits
    torch.testing.assert_close(got, expected)
    # The update changed the weights, so this is not the starting model.
    start = AutoModelForCausalLM.from_pretrained(str(model_dir))
    with torch.no_grad():
        assert not torch.allclose(start(input_ids=ids).logits, got)


def test_exported_critic_keeps_its_value_head(model_dir: Path, tmp_path: Path) -> None:
    critic = CriticEngine(_config(model_dir), role="critic")
    with torch.no_grad():
        critic.module.score.weight.add_(0.5)
    critic.export_hf(tmp_path / "critic")
    reloaded = AutoModelForTokenClassification.from_pretrained(str(tmp_path / "critic"))
    torch.testing.assert_close(reloaded.score.weight, critic.module.score.weight)


def test_metric_accumulator_sums_shares_and_averages_the_rest() -> None:
    metrics = MetricAccumulator()
    for shares in ([0.25, 0.5], [1.0, 2.0]):
        for share in shares:
            metrics.add_share("loss", share)
            metrics.add_mean("clipfrac", share)
        metrics.end_minibatch()
    assert metrics.result() == {"loss": pytest.approx((0.75 + 3.0) / 2), "clipfrac": 0.9375}


def test_mini_batch_must_split_evenly_over_ranks(model_dir: Path, train_batch: Batch) -> None:
    actor = ActorEngine(_config(model_dir), role="actor")
    actor.dp = DataParallel(size=3)
    with pytest.raises(HfsdkError, match="not divisible by the 3 data-parallel ranks"):
        actor.update_actor(train_batch, ActorObjective(policy_loss=reinforce_loss))


def test_model_path_defaults_to_the_default_task(
    monkeypatch: pytest.MonkeyPatch, model_dir: Path, tmp_path: Path
) -> None:
    import hfsdk.core.tasks as tasks

    monkeypatch.setattr(tasks, "default_model_dir", lambda model="warm": model_dir)
    assert resolve_model_path(FSDPRoleConfig(), "actor") == model_dir
    with pytest.raises(HfsdkError, match="not a local HF model directory"):
        resolve_model_path(FSDPRoleConfig(model_path=str(tmp_path)), "critic")
    assert engine_module.resolve_device("cpu") == torch.device("cpu")


def test_attention_kernel_is_eager_only_for_bfloat16_training_on_cpu(model_dir: Path) -> None:
    def kernel(dtype: str, role: str = "actor", choice: str = "auto") -> str:
        config = FSDPRoleConfig(model_path=str(model_dir), dtype=dtype, attn_implementation=choice)
        cls = ActorEngine if role == "actor" else engine_module.FSDPEngine
        return cls(config, role=role).module.config._attn_implementation

    assert kernel("bfloat16") == "eager"
    assert kernel("bfloat16", role="reference") == "sdpa"  # frozen: forward only
    assert kernel("float32") == "sdpa"  # the model's default
    assert kernel("bfloat16", choice="sdpa") == "sdpa"
    assert kernel("float32", choice="eager") == "eager"


def test_a_loaded_state_trains_with_the_engines_optim_config(
    model_dir: Path, train_batch: Batch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Both load paths kept the checkpoint's lr, betas, eps and weight decay; the engine's
    config now wins, group by group (norms and biases stay undecayed)."""
    objective = ActorObjective(policy_loss=reinforce_loss)
    saved_optim = OptimConfig(
        lr=1e-3, warmup_steps=3, weight_decay=0.1, decay_norms_and_biases=False
    )
    original = ActorEngine(attrs.evolve(_config(model_dir), optim=saved_optim), role="actor")
    original.update_actor(train_batch, objective)
    original.save_checkpoint(tmp_path / "ckpt")
    optim = OptimConfig(
        lr=1e-4, warmup_steps=3, betas=(0.5, 0.9), eps=1e-6, weight_decay=0.5,
        decay_norms_and_biases=False,
    )  # fmt: skip
    config = attrs.evolve(_config(model_dir), optim=optim)
    for load in ("load_checkpoint", "load_state_dict"):
        restored = ActorEngine(config, role="actor")
        with caplog.at_level("WARNING"):
            if load == "load_checkpoint":
                restored.load_checkpoint(tmp_path / "ckpt")
            else:
                restored.load_state_dict(original.state_dict())
        assert "betas (0.9, 0.999) -> (0.5, 0.9)" in caplog.text, load
        groups = restored.optimizer.param_groups
        assert [(g["betas"], g["eps"], g["weight_decay"]) for g in groups] == [
            ((0.5, 0.9), 1e-6, 0.5),
            ((0.5, 0.9), 1e-6, 0.0),
        ], load
        metrics = restored.update_actor(train_batch, objective)
        assert metrics["actor/lr"] == pytest.approx(2e-4 / 3), load  # warmup step 2 of 3
        caplog.clear()
