"""Algorithm 2 (Pareto-based candidate selection) on hand-worked score matrices."""

import random
from collections import Counter

import pytest

from gepa_opt.pareto import dominated, dominates, frontier_score, instance_fronts, win_counts
from gepa_opt.selection import (
    CurrentBestSelector,
    EpsilonGreedySelector,
    ParetoSelector,
    make_candidate_selector,
)


def matrix(*rows: list[float]) -> list[dict[int, float]]:
    return [dict(enumerate(row)) for row in rows]


# Worked by hand:
#   s* = [1.0, 1.0, 0.5, 0.2]
#   P*[0] = {c1, c2}, P*[1] = {c2, c4}, P*[2] = {c1, c3}, P*[3] = {c0, c1, c3, c4}
#   c1 >= c0 everywhere and > on instance 0 -> c0 dominated
#   c1 >= c3 everywhere and > on instance 0 -> c3 dominated
#   c1, c2, c4: none is >= another everywhere -> kept
#   P^*[0] = {c1, c2}, P^*[1] = {c2, c4}, P^*[2] = {c1}, P^*[3] = {c1, c4}
#   f = {c1: 3, c2: 2, c4: 2} -> P(c1) = 3/7, P(c2) = P(c4) = 2/7
WORKED = matrix(
    [0.5, 0.0, 0.0, 0.2],
    [1.0, 0.0, 0.5, 0.2],
    [1.0, 1.0, 0.0, 0.0],
    [0.0, 0.0, 0.5, 0.2],
    [0.0, 1.0, 0.0, 0.2],
)


def test_instance_fronts_hold_every_candidate_tied_at_the_best() -> None:
    assert instance_fronts(WORKED) == {
        0: {1, 2},
        1: {2, 4},
        2: {1, 3},
        3: {0, 1, 3, 4},
    }


def test_dominated_candidates_of_the_worked_example() -> None:
    assert dominated(WORKED, instance_fronts(WORKED)) == {0, 3}


def test_weights_are_instances_won_after_pruning() -> None:
    assert win_counts(WORKED) == {1: 3, 2: 2, 4: 2}


def test_sampling_frequencies_match_the_hand_computed_weights() -> None:
    rng = random.Random(1234)
    draws = Counter(ParetoSelector().select(WORKED, rng) for _ in range(14_000))
    assert set(draws) == {1, 2, 4}
    for k, expected in {1: 3 / 7, 2: 2 / 7, 4: 2 / 7}.items():
        assert draws[k] / 14_000 == pytest.approx(expected, abs=0.015)


def test_removal_is_iterated_down_a_dominance_chain() -> None:
    # a < b < c; all three tie on instance 0, so all are in C.
    scores = matrix([1, 0, 0], [1, 1, 0], [1, 1, 1])
    assert dominated(scores, instance_fronts(scores)) == {0, 1}
    assert win_counts(scores) == {2: 3}


def test_equal_score_vectors_share_the_instances_they_tie_on() -> None:
    # Neither of two equal candidates strictly dominates the other: both stay, as P*[i]
    # holds every candidate reaching s*[i].
    scores = matrix([1.0, 0.5], [1.0, 0.5], [0.0, 1.0])
    assert win_counts(scores) == {0: 1, 1: 1, 2: 1}


def test_a_candidate_best_nowhere_is_never_selected() -> None:
    scores = matrix([1.0, 0.0], [0.0, 1.0], [0.6, 0.6])
    assert win_counts(scores) == {0: 1, 1: 1}


def test_dominates_needs_a_strict_improvement() -> None:
    assert dominates({0: 1.0, 1: 0.5}, {0: 1.0, 1: 0.4})
    assert not dominates({0: 1.0, 1: 0.5}, {0: 1.0, 1: 0.5})
    assert not dominates({0: 1.0, 1: 0.0}, {0: 0.0, 1: 1.0})


def test_frontier_score_is_the_mean_of_per_instance_bests() -> None:
    assert frontier_score(WORKED) == pytest.approx((1.0 + 1.0 + 0.5 + 0.2) / 4)


def test_current_best_takes_the_earliest_highest_mean() -> None:
    scores = matrix([0.5, 0.5], [1.0, 0.0], [0.0, 0.2])
    assert CurrentBestSelector().select(scores, random.Random(0)) == 0


def test_epsilon_greedy_explores_at_the_configured_rate() -> None:
    scores = matrix([0.0], [1.0], [0.5])
    rng = random.Random(7)
    assert all(EpsilonGreedySelector(0.0).select(scores, rng) == 1 for _ in range(100))
    picks = Counter(EpsilonGreedySelector(1.0).select(scores, rng) for _ in range(3000))
    assert all(picks[k] > 800 for k in range(3))


def test_unknown_strategy_name_is_refused() -> None:
    with pytest.raises(ValueError, match="candidate_selection"):
        make_candidate_selector("beam", 0.1)  # type: ignore[arg-type]
