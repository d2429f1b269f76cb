"""Proposal shapes, the in-flight policy, restricted parent draws, and budget reservations."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from gepa_opt.budget import Budget, BudgetExhausted
from gepa_opt.config import GEPAConfig
from gepa_opt.in_flight import InFlightPolicy
from gepa_opt.selection import CurrentBestSelector, ParetoSelector
from gepa_opt.shape import ProposalShape


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


def test_the_shape_keeps_p_groups_and_front_extras_take_only_idle_slots_and_free_parents():
    front = InFlightPolicy("front", ProposalShape(2, 2), max_concurrency=8)
    assert front.room(groups=0, proposals=0, spare_slot=False) == "core"
    assert front.room(groups=1, proposals=2, spare_slot=False) == "core"
    assert front.room(groups=2, proposals=4, spare_slot=False) is None  # slots are busy
    assert front.room(groups=2, proposals=4, spare_slot=True) == "extra"
    assert front.room(groups=3, proposals=7, spare_slot=True) is None  # 2 more exceed W
    strict = InFlightPolicy("shape", ProposalShape(2, 2), max_concurrency=8)
    assert strict.room(groups=2, proposals=4, spare_slot=True) is None
    # an extra group never takes a parent that already has a group in flight
    assert front.extra_parents([0, 3, 5], Counter({3: 1, 7: 2})) == {0, 5}
    assert front.extra_parents([3], Counter({3: 1})) == set()


def test_selectors_draw_only_allowed_parents_or_none():
    scores = [{0: 1.0, 1: 0.0}, {0: 0.0, 1: 1.0}, {0: 0.5, 1: 0.5}]
    rng = random.Random(0)
    assert {ParetoSelector().select(scores, rng, allowed={1}) for _ in range(20)} == {1}
    assert ParetoSelector().select(scores, rng, allowed={2}) is None  # 2 wins nowhere
    assert CurrentBestSelector().select(scores, rng, allowed={1}) is None


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
