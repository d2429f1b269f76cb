"""The batched-GEPA wall-time model against predictions worked out by hand."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest

from gepa_opt.runtime_model import (
    CallLatency,
    RuntimePrediction,
    Schedule,
    auto_shape,
    barrier_step_s,
    predict_wall_s,
)
from gepa_opt.shape import ProposalShape


def predict(
    shape: tuple[int, int],
    pool: int,
    budget: int,
    *,
    b: int,
    V: int,
    a: float,
    L: float = 1.0,
    R: float = 1.0,
    schedule: Schedule = Schedule.BARRIER,
    max_in_flight: int | None = None,
) -> RuntimePrediction:
    return predict_wall_s(
        ProposalShape(*shape),
        CallLatency(metric_s=L, reflection_s=R),
        pool,
        budget,
        minibatch_size=b,
        valset_size=V,
        acceptance_rate=a,
        schedule=schedule,
        max_in_flight=max_in_flight,
    )


# 2x2, b=3, V=10, a=0.5, L=1, R=5, B=86 (worked by hand):
#   c = P*b + k*b + a*k*V = 6 + 12 + 20 = 38 calls per step; S = floor((86 - 10) / 38) = 2
#   call-seconds: seed 10 + 2 * (38*1 + 4*5) = 126
#   W=4 barrier: seed ceil(10/4) = 3; step = ceil(6/4)*1 + ceil(4/4)*5 + ceil(12/4)*1
#     + E[ceil(10K/4)], K ~ Bin(4, 1/2): (0*1 + 3*4 + 5*6 + 8*4 + 10*1)/16 = 5.25
#     -> 2 + 5 + 3 + 5.25 = 15.25; T = 3 + 2*15.25 = 33.5
#   W=4 barrier-free: 3 + max(2*58/4, D = 1 + 5 + 1 + 0.5) = 3 + 29 = 32
WORKED: dict[str, Any] = {"shape": (2, 2), "budget": 86, "b": 3, "V": 10, "a": 0.5, "R": 5.0}


@pytest.mark.parametrize("schedule", list(Schedule))
def test_one_worker_is_the_sum_of_sequential_latencies(schedule: Schedule) -> None:
    run = predict(pool=1, schedule=schedule, **WORKED)
    assert run.wall_s == pytest.approx(126.0)
    assert run.utilization == pytest.approx(1.0)
    assert (run.steps, run.proposals, run.metric_calls) == (2, 8, pytest.approx(86.0))


def test_barrier_worked_by_hand() -> None:
    run = predict(pool=4, **WORKED)
    assert run.wall_s == pytest.approx(33.5)
    assert run.utilization == pytest.approx(126 / (4 * 33.5))


def test_barrier_free_worked_by_hand() -> None:
    run = predict(pool=4, schedule=Schedule.BARRIER_FREE, **WORKED)
    assert run.wall_s == pytest.approx(32.0)
    assert run.utilization == pytest.approx(126 / (4 * 32.0))


# 1x1, b=1, V=8, a=0, L=1, R=2, B=8 + 8*2: seed 8 s + 8 proposals of 1 + 2 + 1 s = 40 s in
# sequence. With W=8 the seed takes one round; 8 proposals in flight take 32/8 = 4 s = D.
EIGHT: dict[str, Any] = {"budget": 24, "b": 1, "V": 8, "a": 0.0, "R": 2.0}


def test_eight_workers_run_eight_independent_proposals_in_an_eighth_of_the_time() -> None:
    sequential = predict((1, 1), pool=1, **EIGHT)
    free = predict((1, 1), 8, schedule=Schedule.BARRIER_FREE, max_in_flight=8, **EIGHT)
    assert sequential.wall_s == pytest.approx(40.0)
    assert free.wall_s == pytest.approx(40.0 / 8)
    assert free.utilization == pytest.approx(1.0)
    # An 8x1 step has the same eight proposals in flight by default.
    wide = predict((8, 1), 8, schedule=Schedule.BARRIER_FREE, **EIGHT)
    assert wide.wall_s == pytest.approx(40.0 / 8)


def test_one_proposal_in_flight_leaves_seven_of_eight_workers_idle() -> None:
    # 1x1 runs one proposal at a time by default: seed round + 8 * (1 + 2 + 1), for the
    # barrier engine and the barrier-free one alike.
    barrier = predict((1, 1), pool=8, **EIGHT)
    free = predict((1, 1), pool=8, schedule=Schedule.BARRIER_FREE, **EIGHT)
    for run in (barrier, free):
        assert run.wall_s == pytest.approx(33.0)
        assert run.utilization == pytest.approx(40 / (8 * 33))


def test_long_barrier_free_runs_approach_the_ideal_speedup() -> None:
    kwargs: dict[str, Any] = {"shape": (8, 1), "budget": 5000, "b": 3, "V": 16, "a": 0.25, "R": 3.0}
    sequential = predict(pool=1, **kwargs)
    free = predict(pool=8, schedule=Schedule.BARRIER_FREE, **kwargs)
    assert free.wall_s == pytest.approx(sequential.wall_s / 8, rel=0.01)


def test_barrier_is_never_faster_than_barrier_free() -> None:
    grid = itertools.product(
        [1, 2, 3, 8, 32],  # W
        [(1, 1), (2, 1), (1, 4), (3, 2), (8, 1)],  # P x N
        [0.0, 0.3, 1.0],  # a
        [1, 3],  # b
        [5, 20],  # V
        [0.5, 4.0],  # R
        [20, 60, 500],  # B
    )
    for W, shape, a, b, V, R, B in grid:
        kwargs: dict[str, Any] = {"shape": shape, "budget": B, "b": b, "V": V, "a": a, "R": R}
        barrier = predict(pool=W, **kwargs)
        free = predict(pool=W, schedule=Schedule.BARRIER_FREE, **kwargs)
        case = (W, shape, a, b, V, R, B)
        assert barrier.wall_s >= free.wall_s - 1e-9, case
        assert (barrier.proposals, barrier.metric_calls) == (free.proposals, free.metric_calls)
        assert barrier.metric_calls <= B + 1e-9, case
        for run in (barrier, free):
            assert 0.0 < run.utilization <= 1.0, case


def test_a_budget_that_only_covers_the_seed_runs_no_step() -> None:
    run = predict((2, 2), pool=4, budget=20, b=3, V=10, a=0.5)
    assert (run.steps, run.proposals) == (0, 0)
    assert run.wall_s == pytest.approx(3.0)  # ceil(10 / 4) rounds of L = 1
    assert run.utilization == pytest.approx(10 / (4 * 3.0))


@pytest.mark.parametrize(("a", "expected"), [(0.0, 4.0), (1.0, 7.0)])
def test_barrier_step_counts_valset_rounds_of_accepted_children(a: float, expected: float) -> None:
    # 2x1, b=2, W=4, V=6, L=1, R=2: parents 1 round + reflections 1 round (2 s) + children
    # 1 round, then both children accepted (a=1): ceil(2*6/4) = 3 rounds; none (a=0): 0.
    step = barrier_step_s(ProposalShape(2, 1), CallLatency(1.0, 2.0), 4, 2, 6, a)
    assert step == pytest.approx(expected)


def test_schedule_may_be_given_as_its_string() -> None:
    by_name = predict(pool=4, schedule="barrier_free", **WORKED)
    assert by_name.wall_s == pytest.approx(32.0)


def test_auto_shape_is_one_by_one_for_a_single_worker() -> None:
    assert auto_shape(1, 3, 20) == (1, 1)
    # a one-example minibatch: two children still take one round each of the one slot
    assert auto_shape(1, 1, 20, acceptance_rate=0.1, max_child_rounds=1) == (1, 1)


def test_auto_shape_sizes_the_sibling_group_from_latencies_and_acceptance() -> None:
    # W=8, b=3, two rounds of children: N <= 5. Seconds per accepted child (a=0.3, L=1,
    # R=2, V=20): N=1 (1 + 2 + 1 + 0.3*2.5)/0.3 = 15.8; N=2 (1 + 2 + 1 + 0.51*2.5)/0.51
    # = 10.3; N=4 (1 + 2 + 1.5 + 0.76*2.5)/0.76 = 8.42 and N=5 8.36 tie within 2%: the
    # fewer metric calls per accepted child wins.
    latency = CallLatency(metric_s=1.0, reflection_s=2.0)
    assert auto_shape(8, 3, 20, latency=latency, acceptance_rate=0.3) == (1, 4)
    assert auto_shape(8, 3, 20, latency=latency, acceptance_rate=0.3, max_child_rounds=1) == (
        1,
        2,
    )
    # every child accepted: a sibling only costs metric calls
    assert auto_shape(8, 3, 20, acceptance_rate=1.0) == (1, 1)
    # a slow reflection LM and rare acceptance: many children reflect side by side
    slow = CallLatency(metric_s=1.0, reflection_s=4.0)
    assert auto_shape(8, 1, 20, latency=slow, acceptance_rate=0.2)[1] >= 4
    # a wide pool stops adding children once they barely raise the odds of a winner
    parents, children = auto_shape(32, 3, 20)
    assert parents == 1 and 2 < children < 32 // 3


def test_auto_shape_runs_groups_side_by_side_only_when_winners_rarely_lead() -> None:
    # W=8, b=3, V=24, a=0.1: one group of five, T = 1 + 1 + 1.875 + 0.41*3 = 5.11 s per
    # 0.41 winners (12.5 s each); two groups of two when no winner leads, T = 1 + 1 + 1.5
    # + 0.19*6 = 4.64 s per 2*0.19 useful winners (12.2 s each).
    assert auto_shape(8, 3, 24, acceptance_rate=0.1, lead_rate=0.0) == (2, 2)
    # when winners lead, the second group's winner extends a stale lineage
    for lead_rate in (0.5, 1.0):
        assert auto_shape(8, 3, 24, acceptance_rate=0.1, lead_rate=lead_rate) == (1, 5)
    for acceptance_rate in (0.05, 0.2, 0.5, 0.9):
        assert auto_shape(8, 3, 24, acceptance_rate=acceptance_rate)[0] == 1


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: ProposalShape(0, 1), "ProposalShape.parents"),
        (lambda: ProposalShape(1, 0), "ProposalShape.children"),
        (lambda: CallLatency(0.0, 1.0), "CallLatency.metric_s"),
        (lambda: CallLatency(1.0, -1.0), "CallLatency.reflection_s"),
        (lambda: predict((1, 1), pool=0, budget=50, b=3, V=10, a=0.5), "pool_size"),
        (lambda: predict((1, 1), pool=1, budget=9, b=3, V=10, a=0.5), "budget=9"),
        (lambda: predict((1, 1), pool=1, budget=50, b=0, V=10, a=0.5), "minibatch_size"),
        (lambda: predict((1, 1), pool=1, budget=50, b=3, V=0, a=0.5), "valset_size"),
        (lambda: predict((1, 1), pool=1, budget=50, b=3, V=10, a=1.5), "acceptance_rate"),
        (lambda: auto_shape(4, 3, 10, max_child_rounds=0), "max_child_rounds"),
        (lambda: auto_shape(4, 3, 10, lead_rate=1.5), "lead_rate"),
        (lambda: predict((1, 1), 1, 50, b=3, V=10, a=0.5, max_in_flight=0), "max_in_flight"),
        (lambda: predict(pool=1, schedule="bogus", **WORKED), "bogus"),
    ],
)
def test_invalid_inputs_raise_naming_the_field(make: Callable[[], object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()
