"""A wall-time model of batched GEPA, to pick a step shape and to explain measured speedups.

Batched GEPA (Zhang et al., "Batching the Reflective Optimization Loop", arXiv 2610.36774)
proposes and evaluates "a batch of candidates on each optimization step instead of one
candidate at a time": P parents x N children per parent (their best settings: 2x2 on
LiveBench-Math, 8x1 on HoVer), and "a simple runtime model explains the measured speedups
under a finite worker pool". The paper's text of that model is not in our sources, so the
formulas below are derived from Algorithm 1's stages; they keep the paper's P, N, b, B.

Notation: B metric-call budget, b minibatch size, V valset size (|D_pareto|), L seconds per
metric call (one example evaluated), R seconds per reflection call, r reflection calls per
proposal (components reflected on, run concurrently), W concurrent calls in the worker pool
(metric and reflection calls share it), a acceptance rate (share of children that beat their
parent on the minibatch and are evaluated on the valset), k = P*N proposals per step, m
proposals in flight at once in the barrier-free engine (k there too: P sibling groups of N
children side by side). `predict_wall_s` models upstream-style steps, every accepted
child evaluated on the valset; `auto_shape` models sibling groups, their best child each.

One step, in stages:  P parents on their minibatch (P*b calls of L), k reflections (k*r calls
of R), k children on their parent's minibatch (k*b calls of L), accepted children on the
valset (K*V calls of L, K ~ Binomial(k, a)). Expected metric calls per step:
    c = P*b + k*b + a*k*V.
The seed's valset evaluation (V calls) comes first; then S = floor((B - V) / c) whole steps
run, S*k proposals. Every proposal is assumed to reach its child evaluation (no perfect-parent
skips, no cache hits), the costlier case.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from gepa_opt.shape import ProposalShape


class Schedule(StrEnum):
    BARRIER = "barrier"
    """Each stage of a step waits for its slowest call: ceil(calls / W) rounds per stage."""
    BARRIER_FREE = "barrier_free"
    """A call starts as soon as a slot frees and a proposal as soon as one of m ends."""


@dataclass(frozen=True)
class CallLatency:
    metric_s: float
    """L: seconds for one metric call (one candidate run and scored on one example)."""
    reflection_s: float
    """R: seconds for one reflection-LM call."""

    def __post_init__(self) -> None:
        if not math.isfinite(self.metric_s) or self.metric_s <= 0:
            raise ValueError(f"CallLatency.metric_s must be > 0, got {self.metric_s!r}")
        if not math.isfinite(self.reflection_s) or self.reflection_s < 0:
            raise ValueError(f"CallLatency.reflection_s must be >= 0, got {self.reflection_s!r}")


UNIT_LATENCY = CallLatency(metric_s=1.0, reflection_s=1.0)
"""Equal latencies, for choosing a shape before anything has been measured."""


@dataclass(frozen=True)
class RuntimePrediction:
    wall_s: float
    steps: int
    """S: whole steps the budget pays for after the seed."""
    proposals: int
    """S*k proposals."""
    metric_calls: float
    """Expected metric calls spent: V + S*c (at most the budget)."""
    utilization: float
    """Busy call-seconds over W * wall_s, in (0, 1]."""


def predict_wall_s(
    shape: ProposalShape,
    latency: CallLatency,
    pool_size: int,
    budget: int,
    *,
    minibatch_size: int,
    valset_size: int,
    acceptance_rate: float,
    reflections_per_proposal: int = 1,
    schedule: Schedule = Schedule.BARRIER,
    max_in_flight: int | None = None,
) -> RuntimePrediction:
    """Predicted wall time of a run that spends `budget` metric calls.

    Both schedules share the seed stage ceil(V/W)*L (no proposal can start before the pool
    has a scored candidate) and the work: call-seconds w = V*L + S*(c*L + k*r*R).
      barrier:       T = ceil(V/W)*L + S*T_step, with
                     T_step = ceil(P*b/W)*L + ceil(k*r/W)*R + ceil(k*b/W)*L
                              + E[ceil(K*V/W)]*L.
      barrier-free:  T = ceil(V/W)*L + max(S*(c*L + k*r*R)/W, max(1, S*k/m)*D), with
                     D = 2*L + R + a*L one proposal's critical path (the calls of each of
                     its stages run side by side) and m = `max_in_flight` (default k).
    The barrier-free T is the fluid limit of a pool kept busy: the work drains W calls at a
    time, and the S*k proposals form m chains of D each. A real run ends up to about one D
    later (the last proposals leave slots idle; cf. Graham's bound work/W + (1 - 1/W)*D),
    small against a whole run.
    Since ceil(x/W) >= x/W and each barrier stage takes at least one round, the barrier T is
    never below the barrier-free T (for m >= k); with W = 1 both are the sum of all call
    latencies.
    """
    b, V, a = minibatch_size, valset_size, acceptance_rate
    _check_workload(b, V, a, reflections_per_proposal)
    _check_int("pool_size", pool_size, minimum=1)
    _check_int("budget", budget, minimum=1)
    if budget < V:
        raise ValueError(f"budget={budget} cannot cover the seed's valset evaluation (V={V})")
    schedule = Schedule(schedule)
    L, R = latency.metric_s, latency.reflection_s
    W, r, k = pool_size, reflections_per_proposal, shape.width
    m = k if max_in_flight is None else max_in_flight
    _check_int("max_in_flight", m, minimum=1)
    calls_per_step = metric_calls_per_step(shape, b, V, a)
    steps = math.floor((budget - V) / calls_per_step + 1e-9)  # float noise must not drop a step
    step_work_s = calls_per_step * L + k * r * R
    work_s = V * L + steps * step_work_s
    seed_s = math.ceil(V / W) * L
    if schedule is Schedule.BARRIER:
        step_s = barrier_step_s(shape, latency, W, b, V, a, r)
        wall_s = seed_s + steps * step_s
    else:
        chains_s = max(1.0, steps * k / m) * (2 * L + R + a * L)
        wall_s = seed_s + (max(steps * step_work_s / W, chains_s) if steps else 0.0)
    return RuntimePrediction(
        wall_s=wall_s,
        steps=steps,
        proposals=steps * k,
        metric_calls=V + steps * calls_per_step,
        utilization=min(1.0, work_s / (W * wall_s)),
    )


def metric_calls_per_step(
    shape: ProposalShape, minibatch_size: int, valset_size: int, acceptance_rate: float
) -> float:
    """c = P*b + k*b + a*k*V: each parent's minibatch, every child's, accepted valsets."""
    k, b = shape.width, minibatch_size
    return shape.parents * b + k * b + acceptance_rate * k * valset_size


def barrier_step_s(
    shape: ProposalShape,
    latency: CallLatency,
    pool_size: int,
    minibatch_size: int,
    valset_size: int,
    acceptance_rate: float,
    reflections_per_proposal: int = 1,
) -> float:
    """T_step of a barrier-synchronized step: each stage lasts ceil(calls / W) rounds."""
    L, R, W = latency.metric_s, latency.reflection_s, pool_size
    k, b = shape.width, minibatch_size
    return (
        math.ceil(shape.parents * b / W) * L
        + math.ceil(k * reflections_per_proposal / W) * R
        + math.ceil(k * b / W) * L
        + _expected_valset_rounds(k, acceptance_rate, valset_size, W) * L
    )


def auto_shape(
    pool_size: int,
    minibatch_size: int,
    valset_size: int,
    *,
    latency: CallLatency = UNIT_LATENCY,
    acceptance_rate: float = 0.5,
    lead_rate: float = 1.0,
    reflections_per_proposal: int = 1,
    max_child_rounds: int = 2,
) -> tuple[int, int]:
    """(P, N): the shape with the least expected seconds per useful accepted child.

    A group is one parent and one minibatch with N children, one improving child sent to
    the valset (`GEPAConfig.siblings` "first" or "best"); P groups run side by side on
    the W slots, each stage lasting its calls over W (at least one call's time: with
    "first" a group waits for its fastest improving child, so this overstates the
    reflection stage of a wide group),
        T(P, N) = max(1, P*b/W)*L + max(1, P*N*r/W)*R + max(1, P*N*b/W)*L
                  + q_N*max(1, P*V/W)*L,
    where q_N = 1 - (1 - a)^N is the chance that some child beats its parent. Depth is
    what a second group costs: it draws its parent while the first is in flight, so when
    the first's winner becomes the pool's new best (the lineage deepens: `lead_rate` f,
    measured as the share of winners that did) the second extends a lineage one step
    behind. Useful winners per round are q_N*(1 + (P-1)*(1-f)); among the shapes within
    2% of the fewest seconds per useful winner, the fewest metric calls per useful
    winner, P*(b + N*b + q_N*V) / useful, wins: past a few children q_N barely moves
    while every child still pays its minibatch. Only P*N*b <= max_child_rounds*W is
    considered. Every group pays its parent's minibatch here, though a group continued
    from a winner on the minibatch it won on pays none (`reuse_winning_minibatch`): the
    costlier case, as for cache hits. A slow reflection LM (R >> L) or a low acceptance
    rate favours more children, a certain acceptance one child, and only a search whose
    winners rarely lead (a shallow one) a second group. This rule is ours: the
    batched-GEPA paper's abstract, all we have of it, names only its best shapes (8x1 on
    HoVer, 2x2 on LiveBench-Math), measured on throughput rather than depth.
    """
    _check_int("pool_size", pool_size, minimum=1)
    _check_int("max_child_rounds", max_child_rounds, minimum=1)
    _check_workload(minibatch_size, valset_size, acceptance_rate, reflections_per_proposal)
    if not 0.0 <= lead_rate <= 1.0:
        raise ValueError(f"lead_rate must be in [0, 1], got {lead_rate!r}")
    b, V, W, r = minibatch_size, valset_size, pool_size, reflections_per_proposal
    L, R, a, f = latency.metric_s, latency.reflection_s, max(acceptance_rate, 1e-3), lead_rate

    def cost(p: int, n: int) -> tuple[float, float]:
        q = 1 - (1 - a) ** n
        seconds = (
            max(1, p * b / W) * L
            + max(1, p * n * r / W) * R
            + max(1, p * n * b / W) * L
            + q * max(1, p * V / W) * L
        )
        useful = q * (1 + (p - 1) * (1 - f))
        return seconds / useful, p * (b + n * b + q * V) / useful

    room = max(b, max_child_rounds * W)  # one child of one group always fits
    costs = {
        (p, n): cost(p, n) for p in range(1, room // b + 1) for n in range(1, room // (p * b) + 1)
    }
    fastest = min(seconds for seconds, _ in costs.values())
    near = [shape for shape, (seconds, _) in costs.items() if seconds <= fastest * 1.02]
    return min(near, key=lambda shape: (costs[shape][1], shape))


def _expected_valset_rounds(
    proposals: int, acceptance_rate: float, valset_size: int, W: int
) -> float:
    """E[ceil(K*V/W)] for K ~ Binomial(k, a) accepted children, each evaluated on V examples."""
    a = acceptance_rate
    return sum(
        math.comb(proposals, accepted)
        * a**accepted
        * (1 - a) ** (proposals - accepted)
        * math.ceil(accepted * valset_size / W)
        for accepted in range(proposals + 1)
    )


def _check_workload(
    minibatch_size: int, valset_size: int, acceptance_rate: float, reflections_per_proposal: int
) -> None:
    _check_int("minibatch_size", minibatch_size, minimum=1)
    _check_int("valset_size", valset_size, minimum=1)
    _check_int("reflections_per_proposal", reflections_per_proposal, minimum=1)
    if not 0.0 <= acceptance_rate <= 1.0:
        raise ValueError(f"acceptance_rate must be in [0, 1], got {acceptance_rate!r}")


def _check_int(name: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
