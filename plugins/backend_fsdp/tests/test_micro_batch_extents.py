"""Token budgets count a pass as wide as it runs: longest prompt + longest response."""

from __future__ import annotations

import torch

from hfsdk_backend_common.token_ops import padding_columns
from hfsdk_backend_fsdp.micro_batches import padded_cost, row_extents, token_budget_groups

PROMPT, RESPONSE = 12, 12


def _masks(extents: list[tuple[int, int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """(attention_mask, response_mask) of left-padded prompts and right-padded responses."""
    attention = torch.zeros(len(extents), PROMPT + RESPONSE, dtype=torch.long)
    for i, (prompt, response) in enumerate(extents):
        attention[i, PROMPT - prompt : PROMPT + response] = 1
    return attention, attention[:, PROMPT:].clone()


def _run_width(extents: list[tuple[int, int]], rows: list[int]) -> int:
    """The width a pass over ``rows`` runs at once padding columns are dropped."""
    attention, response = _masks(extents)
    first, kept = padding_columns(attention[rows], response[rows])
    return PROMPT - first + kept


def test_extents_are_read_from_the_mask() -> None:
    extents = [(10, 1), (1, 10), (3, 3)]
    attention, _ = _masks(extents)
    assert row_extents(attention, RESPONSE) == extents


def test_a_long_prompt_and_a_long_response_from_two_rows_do_not_share_a_tight_pass() -> None:
    # Both rows hold 11 tokens, but together they run 10 + 10 = 20 columns wide.
    extents = [(10, 1), (1, 10)]
    assert padded_cost(extents, [0, 1]) == 2 * _run_width(extents, [0, 1]) == 40
    assert token_budget_groups(extents, 22) == [[0], [1]]
    assert token_budget_groups(extents, 40) == [[0, 1]]


def test_every_pass_stays_within_the_budget_at_the_width_it_runs() -> None:
    generator = torch.Generator().manual_seed(0)
    extents = [
        (int(p), int(r))
        for p, r in zip(
            torch.randint(1, PROMPT + 1, (24,), generator=generator),
            torch.randint(1, RESPONSE + 1, (24,), generator=generator),
            strict=True,
        )
    ]
    budget = 48
    for by_length in (False, True):
        groups = token_budget_groups(extents, budget, by_length=by_length)
        assert sorted(r for g in groups for r in g) == list(range(len(extents)))
        for rows in groups:
            cost = len(rows) * _run_width(extents, rows)
            assert cost == padded_cost(extents, rows)
            assert cost <= budget or len(rows) == 1, (rows, cost)


def test_plain_lengths_keep_their_meaning() -> None:
    assert padded_cost([10, 3], [0, 1]) == 20
    assert token_budget_groups([10, 3, 9, 2], 20) == [[0, 1], [2, 3]]
