"""Proposal shapes, the parent queue, and budget reservations."""

from __future__ import annotations

import random

import pytest

from gepa_opt.budget import Budget, BudgetExhausted
from gepa_opt.config import GEPAConfig
from gepa_opt.selection import ParetoSelector
from gepa_opt.shape import ParentQueue, ProposalShape


def test_shapes_parse_and_reject_bad_text():
    assert ProposalShape.parse("2x2") == ProposalShape(2, 2)
    assert ProposalShape.parse(" 8 X 1 ").width == 8
    for bad in ["2", "0x3", "2x", "axb", "2x2x2"]:
        with pytest.raises(ValueError, match="PxN"):
            ProposalShape.parse(bad)
    with pytest.raises(ValueError, match="PxN"):
        GEPAConfig(proposal_shape="wide")
    with pytest.raises(ValueError, match="ProposalShape.children"):
        ProposalShape(2, 0)


def test_parents_come_in_groups_of_p_each_n_times_sharing_a_minibatch():
    # two candidates, each winning a different instance: Pareto sampling can pick either
    scores = [{0: 1.0, 1: 0.0}, {0: 0.0, 1: 1.0}]
    batches = iter([[k] for k in range(100)])
    queue = ParentQueue(
        ProposalShape(2, 3), ParetoSelector(), random.Random(0), lambda: next(batches)
    )
    drawn = [queue.next(scores) for _ in range(12)]
    for group in (drawn[:6], drawn[6:]):
        first, second = group[:3], group[3:]
        # each (parent, minibatch) N=3 times in a row; the P=2 pairs have their own minibatch
        assert len({(p, tuple(m)) for p, m in first}) == 1
        assert len({(p, tuple(m)) for p, m in second}) == 1
        assert first[0][1] != second[0][1]
    assert {p for p, _ in drawn} == {0, 1}
    assert [m for _, m in drawn[::3]] == [[0], [1], [2], [3]]


def test_reservations_bound_the_budget_and_return_what_they_did_not_use():
    budget = Budget(10)
    first = budget.reserve(6)
    assert not budget.fits(5) and budget.fits(4)
    with pytest.raises(BudgetExhausted):
        budget.reserve(5)
    first.charge(2)
    with pytest.raises(BudgetExhausted):
        first.charge(5)  # more than is left of the reservation
    first.release()
    assert (budget.metric_calls_used, budget.reserved, budget.remaining) == (2, 0, 8)
