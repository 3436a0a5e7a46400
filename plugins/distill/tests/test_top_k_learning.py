"""The top-k logit KL moves the default student toward the default teacher.

The real pair of the distill preset (the warm-started teacher, the less-trained
student), the fsdp engines in this process: the student samples, the teacher
ships its top-k, and updates on the top-k KL alone (no policy gradient) bring
the student's whole next-token distribution closer to the teacher's.
"""

from __future__ import annotations

import pytest
import torch

from hfsdk import REF_TOP_K, Batch, get_registry, load_tokenizer
from hfsdk_backend_common.objectives import ActorObjective
from hfsdk_backend_common.optim_config import OptimConfig
from hfsdk_backend_common.rollout.hf_rollout import HFRollout
from hfsdk_backend_common.rollout_config import HFRolloutConfig
from hfsdk_backend_fsdp.actor import ActorEngine, ReferenceEngine, ResponseExtras
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig
from hfsdk_distill.objective import distill_actor_objective
from hfsdk_distill.student import student_model_path, teacher_model_path
from hfsdk_distill.top_k import TEACHER_TOP_K_IDS, TEACHER_TOP_K_LOG_PROBS

PROMPTS = ["2 + 3 =", "0 + 8 =", "7 + 1 =", "4 + 4 =", "9 + 6 =", "5 + 0 =", "3 + 3 =", "8 + 2 ="]
K = 8
UPDATES = 8


def _prompts(model_dir: str) -> Batch:
    tokenizer = load_tokenizer(model_dir)
    encoded = tokenizer(PROMPTS, return_tensors="pt", padding=True)
    return Batch.from_dict(
        tensors={"input_ids": encoded.input_ids, "attention_mask": encoded.attention_mask},
        non_tensors={"uid": [str(i) for i in range(len(PROMPTS))]},
    )


def _forward_kl(teacher: ReferenceEngine, student: ActorEngine, batch: Batch) -> float:
    """Full-vocabulary KL(teacher‖student) per valid response position, averaged."""
    every = batch.select()
    every.meta[REF_TOP_K] = student.module.config.vocab_size  # the whole distribution
    t = teacher.compute_ref_log_prob(every)
    # The student's log-probs of the teacher's ids (its whole vocabulary, in the teacher's order).
    student.module.eval()
    ids = batch.select()
    ids["all_ids"] = t["ref_top_k_ids"]
    extras = ResponseExtras(ids_keys=("all_ids",))
    with torch.no_grad():
        student._response_outputs(ids, 1.0, "none", extras)
    p_log = t["ref_top_k_log_probs"]
    q_log = extras.ids_log_probs["all_ids"]
    per_token = (p_log.exp() * (p_log - q_log)).sum(-1)
    mask = batch["response_mask"].bool()
    return float(per_token[mask].mean())


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_top_k_updates_bring_the_student_to_the_teacher(seed: int) -> None:
    torch.manual_seed(seed)
    student = ActorEngine(
        FSDPRoleConfig(
            model_path=student_model_path(), mini_batch_size=32, micro_batch_size=32,
            optim=OptimConfig(lr=1e-3), seed=seed,
        ),
        role="actor",
    )  # fmt: skip
    teacher = ReferenceEngine(FSDPRoleConfig(model_path=teacher_model_path()), role="teacher")
    rollout = HFRollout(HFRolloutConfig(max_response_length=8, n=4, temperature=1.0), student)
    batch = rollout.generate_sequences(_prompts(student_model_path()))
    asked = batch.select()
    asked.meta[REF_TOP_K] = K
    scored = teacher.compute_ref_log_prob(asked)
    batch[TEACHER_TOP_K_LOG_PROBS] = scored["ref_top_k_log_probs"]
    batch[TEACHER_TOP_K_IDS] = scored["ref_top_k_ids"]
    batch["advantages"] = torch.zeros(batch["responses"].shape)  # the top-k KL alone
    batch = batch.union(student.compute_log_prob(batch).select(["old_log_probs"]))
    terms = distill_actor_objective(_algorithm_config())
    objective = ActorObjective(
        policy_loss=get_registry("policy_losses")["ppo_clip"].impl,
        token_terms=terms.token_terms,
    )
    before = _forward_kl(teacher, student, batch)
    losses = [student.update_actor(batch, objective)["actor/top_k_kl"] for _ in range(UPDATES)]
    after = _forward_kl(teacher, student, batch)
    # The trained quantity falls, and so does the KL over the whole vocabulary, which the
    # loss never sees beyond the top-k and the tail bucket. Measured (shared CPU, AVX2):
    # loss 0.35 -> 0.09 / 0.34 -> 0.14, full KL 0.42 -> 0.12 / 0.42 -> 0.17 for seeds 0 / 1.
    assert losses[-1] < 0.7 * losses[0], losses
    assert after < 0.8 * before, (before, after)


def _algorithm_config() -> object:
    from hfsdk.core.config import load_run_config

    paths = ["actor.model_path=/m/student", "teacher.model_path=/m/teacher"]
    return load_run_config("distill", None, [*paths, f"algorithm.top_k={K}"]).algorithm
