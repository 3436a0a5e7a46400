"""The actor's loss terms of a distillation run: the usual ones, plus the top-k logit KL."""

from __future__ import annotations

from typing import Any

from hfsdk import ActorLossTerms, TokenIdsLossTerm, default_actor_objective
from hfsdk_distill.top_k import TEACHER_TOP_K_IDS, TopKKLConfig, top_k_kl_loss


def distill_actor_objective(algorithm_config: Any) -> ActorLossTerms:
    """:func:`hfsdk.default_actor_objective`, with the ``top_k_kl`` term when ``top_k`` > 0."""
    terms = default_actor_objective(algorithm_config)
    if not algorithm_config.top_k:
        return terms
    term = TokenIdsLossTerm(
        name="top_k_kl",
        ids_key=TEACHER_TOP_K_IDS,
        fn=top_k_kl_loss,
        coef=algorithm_config.top_k_coef,
        config=TopKKLConfig(tail=algorithm_config.top_k_tail),
    )
    return ActorLossTerms(
        kl_loss_coef=terms.kl_loss_coef,
        kl_estimator=terms.kl_estimator,
        entropy_coef=terms.entropy_coef,
        token_terms=(*terms.token_terms, term),
    )
