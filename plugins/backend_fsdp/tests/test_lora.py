"""LoRA on the fsdp actor: adapters train, the base stays, the reference is the base.

One process (no sharding); ``test_lora_two_ranks.py`` repeats the update at dp 2.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from hfsdk.core.batch import Batch
from hfsdk_backend_common.lora_config import LoraConfig
from hfsdk_backend_common.objectives import ActorObjective
from hfsdk_backend_common.optim_config import OptimConfig
from hfsdk_backend_common.rollout.hf_rollout import HFRollout
from hfsdk_backend_common.rollout_config import HFRolloutConfig
from hfsdk_backend_common.token_ops import response_log_probs
from hfsdk_backend_fsdp.actor import ActorEngine, ReferenceEngine
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig
from hfsdk_backend_fsdp.shared_base import BaseOfLoraActor, find, offer
from hfsdk_policy_losses.losses import reinforce_loss
from hfsdk_testing import RngForked, record_rng_forks

PROMPTS = ["3 + 5 =", "1 + 2 + 3 =", "9 + 9 =", "4 + 0 ="]
LORA = LoraConfig(rank=4, alpha=8.0, target_modules=("q_proj", "v_proj", "down_proj"))


def _actor(model_dir: Path, **overrides: object) -> ActorEngine:
    settings: dict[str, object] = {
        "model_path": str(model_dir),
        "mini_batch_size": 8,
        "micro_batch_size": 8,
        "optim": OptimConfig(lr=2e-2),
        "lora": LORA,
        **overrides,
    }
    return ActorEngine(FSDPRoleConfig(**settings), role="actor")  # type: ignore[arg-type]


@pytest.fixture
def batch(model_dir: Path, make_prompts: Callable[..., Batch]) -> Batch:
    """8 sampled responses with +1 / -1 advantages."""
    torch.manual_seed(0)
    plain = ActorEngine(FSDPRoleConfig(model_path=str(model_dir)), role="actor")
    rollout = HFRollout(HFRolloutConfig(max_response_length=5, n=2, temperature=1.0), plain)
    out = rollout.generate_sequences(make_prompts(PROMPTS))
    out = out.union(plain.compute_log_prob(out))
    out["advantages"] = torch.tensor([1.0] * 4 + [-1.0] * 4)[:, None] * out["response_mask"]
    return out


def _named(engine: ActorEngine, lora: bool) -> dict[str, torch.Tensor]:
    return {
        k: v.detach().clone() for k, v in engine.module.named_parameters() if ("lora_" in k) == lora
    }


def test_only_adapters_train_and_the_base_stays(model_dir: Path, batch: Batch) -> None:
    actor = _actor(model_dir)
    trainable = {k for k, p in actor.module.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in k for k in trainable)
    # 2 layers x 3 target modules x (A, B)
    assert len(trainable) == 12
    optimized = sum(len(g["params"]) for g in actor.optimizer.param_groups)
    assert optimized == len(trainable)
    # B starts at zero: the LoRA actor computes exactly the base model's log-probs.
    torch.testing.assert_close(
        actor.compute_log_prob(batch)["old_log_probs"], batch["old_log_probs"]
    )
    base, adapters = _named(actor, False), _named(actor, True)
    actor.update_actor(batch, ActorObjective(policy_loss=reinforce_loss))
    for name, value in _named(actor, False).items():
        assert torch.equal(value, base[name]), name
    changed = {k for k, v in _named(actor, True).items() if not torch.equal(v, adapters[k])}
    # B starts at 0, so A's first gradient is 0: the first step moves every B, the next A too.
    assert changed == {k for k in adapters if "lora_B" in k}
    new = actor.compute_log_prob(batch)["old_log_probs"]
    mask = batch["response_mask"]
    change = ((new - batch["old_log_probs"]) * mask).sum(-1) / mask.sum(-1)
    assert change[:4].mean() > 0.05 and change[4:].mean() < -0.05
    assert sum(len(s) for s in actor.optimizer.state.values()) == 3 * len(trainable)
    actor.update_actor(batch, ActorObjective(policy_loss=reinforce_loss))
    changed = {k for k, v in _named(actor, True).items() if not torch.equal(v, adapters[k])}
    assert changed == set(adapters)


def test_reference_is_the_actor_with_adapters_disabled(model_dir: Path, batch: Batch) -> None:
    actor = _actor(model_dir)
    actor.update_actor(batch, ActorObjective(policy_loss=reinforce_loss))
    reference = ReferenceEngine(FSDPRoleConfig(model_path=str(model_dir)), role="reference")
    expected = reference.compute_ref_log_prob(batch)["ref_log_probs"]
    got = actor.compute_ref_log_prob(batch)["ref_log_probs"]
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    # ... and the adapters are back on afterwards.
    trained = actor.compute_log_prob(batch)["old_log_probs"]
    assert (trained - expected).abs().max() > 1e-2
    # A reference worker in the actor's process finds it and serves from it.
    offer(actor)
    shared = find(model_dir, None, reference.config)
    assert shared is actor
    via = BaseOfLoraActor(shared).compute_ref_log_prob(batch)["ref_log_probs"]
    torch.testing.assert_close(via, expected, atol=1e-5, rtol=1e-5)
    assert find(model_dir.parent, None, reference.config) is None


def test_a_reference_configured_unlike_the_shared_base_is_warned_about(
    model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The base is shared whatever the reference section says (a second copy is what LoRA
    saves), but a float32 reference computed in the actor's bfloat16 is said, not silent."""
    import attrs

    actor = _actor(model_dir, dtype="bfloat16", attn_implementation="eager")
    offer(actor)
    # The actor's ref passes are of its 8 rows (micro_batch_size: no forward size of its own).
    reference = FSDPRoleConfig(model_path=str(model_dir), forward_micro_batch_size=8)
    bf16 = attrs.evolve(reference, dtype="bfloat16")
    alike = attrs.evolve(bf16, attn_implementation="eager")
    with caplog.at_level("WARNING", logger="hfsdk_backend_fsdp.shared_base"):
        assert find(model_dir, None, alike) is actor
        assert not caplog.records  # set alike: nothing to say
        assert find(model_dir, None, reference) is actor
        assert "reference.dtype=float32 but actor.dtype=bfloat16" in caplog.text
        caplog.clear()
        assert find(model_dir, None, bf16) is actor  # the model's default kernel, not eager
        assert "computes with eager attention" in caplog.text
        # The pass settings were the actor's silently (the reference's 1-row passes ran as 8).
        caplog.clear()
        passes = {"forward_micro_batch_size": 1, "packing": True, "remove_padding": False}
        assert find(model_dir, None, attrs.evolve(alike, **passes)) is actor
        for said in (
            "reference.forward_micro_batch_size=1 but actor.micro_batch_size=8",
            "reference.packing=true but actor.packing=false",
            "reference.remove_padding=false but actor.remove_padding=true",
        ):
            assert said in caplog.text
        caplog.clear()
        assert find(model_dir, None, attrs.evolve(alike, micro_batch_tokens=64)) is actor
        assert "reference.micro_batch_tokens=64 but actor.micro_batch_tokens=null" in caplog.text
        caplog.clear()
        other = "cpu" if actor.device.type == "cuda" else "cuda"
        assert find(model_dir, None, attrs.evolve(alike, device=other)) is actor
        assert f"reference.device={other} but the actor computes on" in caplog.text


def test_rollout_gets_merged_hf_weights(
    model_dir: Path, batch: Batch, make_prompts: Callable[..., Batch], tmp_path: Path
) -> None:
    from transformers import AutoModelForCausalLM

    actor = _actor(model_dir)
    actor.update_actor(batch, ActorObjective(policy_loss=reinforce_loss))
    weights = {k: v.clone() for k, v in actor.hf_weights()}
    hf = AutoModelForCausalLM.from_pretrained(str(model_dir))
    assert set(weights) == {k for k, _ in hf.named_parameters()}  # no peft name leaks
    hf.load_state_dict(weights, strict=True)
    with torch.no_grad():
        logits = hf(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            position_ids=batch["position_ids"],
        ).logits
    merged, _ = response_log_probs(logits, batch["responses"][:, :], temperature=1.0)
    mask = batch["response_mask"]
    width = batch["responses"].shape[1]
    torch.testing.assert_close(
        merged[:, -width:] * mask,
        actor.compute_log_prob(batch)["old_log_probs"],
        atol=1e-5,
        rtol=1e-5,
    )
    # The hf rollout fills its generation module from those weights: greedy decoding equals
    # a plain actor's on the merged model.
    hf.save_pretrained(str(tmp_path / "merged"))
    actor.tokenizer.save_pretrained(str(tmp_path / "merged"))
    plain = ActorEngine(FSDPRoleConfig(model_path=str(tmp_path / "merged")), role="actor")
    config = HFRolloutConfig(max_response_length=6)
    prompts = make_prompts(PROMPTS)
    ours = HFRollout(config, actor).generate_sequences(prompts, greedy=True)
    theirs = HFRollout(config, plain).generate_sequences(prompts, greedy=True)
    assert torch.equal(ours["responses"], theirs["responses"])


def test_checkpoint_holds_only_adapters_and_resumes(
    model_dir: Path, batch: Batch, tmp_path: Path
) -> None:
    import torch.distributed.checkpoint as dcp

    objective = ActorObjective(policy_loss=reinforce_loss)
    actor = _actor(model_dir)
    actor.update_actor(batch, objective)
    path = actor.save_checkpoint(tmp_path)
    saved = dcp.FileSystemReader(str(path)).read_metadata().state_dict_metadata
    model_keys = [k for k in saved if k.startswith("model.")]
    assert model_keys and all("lora_" in k for k in model_keys), model_keys[:3]
    resumed = _actor(model_dir)
    resumed.load_checkpoint(tmp_path)
    torch.testing.assert_close(
        resumed.compute_log_prob(batch)["old_log_probs"],
        actor.compute_log_prob(batch)["old_log_probs"],
    )
    actor.update_actor(batch, objective)
    resumed.update_actor(batch, objective)  # the optimizer state came back too
    for name, value in _named(actor, True).items():
        torch.testing.assert_close(_named(resumed, True)[name], value, atol=1e-7, rtol=1e-6)


def test_export_writes_the_adapter_and_the_merged_model(
    model_dir: Path, batch: Batch, tmp_path: Path
) -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    actor = _actor(model_dir, lora=LoraConfig(rank=4, alpha=8.0, export_merged=True))
    actor.update_actor(batch, ActorObjective(policy_loss=reinforce_loss))
    expected = actor.compute_log_prob(batch)["old_log_probs"]
    out = actor.export_hf(tmp_path / "export")
    assert (out / "adapter_config.json").is_file() and not (out / "config.json").exists()
    # Written by peft's save_pretrained, moved in atomically: nothing of the staging is left.
    import json

    saved = json.loads((out / "adapter_config.json").read_text())
    assert saved["base_model_name_or_path"] == str(model_dir) and saved["r"] == 4
    assert not list(out.glob(".adapter-*")) and not list(out.glob(".*.tmp"))
    base = AutoModelForCausalLM.from_pretrained(str(model_dir))
    with_adapter = PeftModel.from_pretrained(base, str(out)).eval()
    merged = AutoModelForCausalLM.from_pretrained(str(out / "merged")).eval()
    mask = batch["response_mask"]
    for model in (with_adapter, merged):
        with torch.no_grad():
            logits = model(
                input_ids=batch["input_ids"],
                attention_mask=batch["attention_mask"],
                position_ids=batch["position_ids"],
            ).logits
        log_probs, _ = response_log_probs(logits, batch["responses"])
        torch.testing.assert_close(log_probs * mask, expected, atol=1e-5, rtol=1e-5)


def test_the_adapter_export_carries_the_models_processor_files(
    model_dir: Path, tmp_path: Path
) -> None:
    """A vision-language model's LoRA export loads with its image processor, as a full
    export does (it had the tokenizer only)."""
    import shutil

    from hfsdk_backend_fsdp.engine import PROCESSOR_FILES

    source = tmp_path / "model"
    shutil.copytree(model_dir, source)
    settings = '{"image_processor_type": "Qwen2VLImageProcessor"}'
    (source / PROCESSOR_FILES[0]).write_text(settings)
    out = _actor(source).export_hf(tmp_path / "export")
    assert (out / "adapter_config.json").is_file()
    assert (out / PROCESSOR_FILES[0]).read_text() == settings
    assert not (out / PROCESSOR_FILES[1]).exists()  # only what the model directory has


def test_lora_is_for_the_policy_only(model_dir: Path) -> None:
    from hfsdk import HfsdkError

    config = FSDPRoleConfig(model_path=str(model_dir), lora=LORA)
    with pytest.raises(
        HfsdkError, match=r"reference\.lora\.rank=4: LoRA adapters train the policy"
    ):
        ReferenceEngine(config, role="reference")


def test_a_target_module_the_model_lacks_is_named_with_the_ones_it_has(model_dir: Path) -> None:
    from transformers import AutoModelForCausalLM

    from hfsdk import HfsdkError
    from hfsdk_backend_fsdp.lora import attach_adapters

    model = AutoModelForCausalLM.from_pretrained(str(model_dir))
    # Before: 'v_prj' was ignored beside 'q_proj' (an adapter on q alone, nothing said).
    config = LoraConfig(rank=4, target_modules=("q_proj", "v_prj"))
    with pytest.raises(HfsdkError, match=r"names \['v_prj'\].*'q_proj', 'up_proj', 'v_proj'"):
        attach_adapters(model, config, seed=0)
    attach_adapters(model, LoraConfig(rank=4, target_modules=("q_proj", "v_proj")), seed=0)


def test_the_target_check_runs_before_any_worker(tmp_path: Path) -> None:
    from hfsdk import HfsdkError, load_run_config
    from hfsdk.core.trainer.trainer import Trainer

    settings = ["actor.lora.rank=4", "actor.lora.target_modules=[nope_proj]"]
    # Before: a worker failure (exit 3) once the models were being built.
    with pytest.raises(HfsdkError, match=r"^actor.lora.target_modules names \['nope_proj'\]"):
        Trainer(load_run_config("grpo", None, settings), tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_adapters_are_seeded_without_reseeding_cuda_for_good(
    model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``torch.manual_seed`` reseeds CUDA too: attaching the adapters forks the current CUDA
    device's generator as well as the CPU one, so it leaves both as they were."""
    from transformers import AutoModelForCausalLM

    from hfsdk_backend_fsdp.lora import attach_adapters

    model = AutoModelForCausalLM.from_pretrained(str(model_dir))
    forked = record_rng_forks(monkeypatch)
    with pytest.raises(RngForked):
        attach_adapters(model, LoraConfig(rank=4, target_modules=("q_proj",)), seed=0)
    assert forked == [[0]]
