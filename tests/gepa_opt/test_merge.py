"""System-aware Merge (the paper's appendix B) on hand-worked pools."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from gepa_opt.merge import MergePlan, ancestors, find_merge, merge_accepted, merge_subsample
from gepa_opt.types import Candidate


def scores(mean: float, n: int = 4) -> dict[int, float]:
    """Flat per-instance scores, so a candidate's aggregate is exactly `mean`."""
    return dict.fromkeys(range(n), mean)


def merge(
    candidates: list[Candidate],
    parents: list[tuple[int, ...]],
    means: list[float],
    frontier: list[int],
    seed: int = 0,
    tried: set[tuple[int, int, int]] | None = None,
) -> MergePlan | None:
    val_scores = [scores(m) for m in means]
    return find_merge(
        candidates, parents, val_scores, random.Random(seed), tried or set(), frontier
    )


# Seed 0; child 1 rewrote "a", child 2 rewrote "b": complementary lineages.
SIBLINGS = [
    {"a": "A0", "b": "B0"},
    {"a": "A1", "b": "B0"},
    {"a": "A0", "b": "B2"},
]
SIBLING_PARENTS: list[tuple[int, ...]] = [(), (0,), (0,)]


def test_ancestors_follow_every_parent_of_a_merge() -> None:
    parents: list[tuple[int, ...]] = [(), (0,), (0,), (1, 2), (3,), (0,)]
    assert ancestors(parents, 4) == {0, 1, 2, 3}
    assert ancestors(parents, 5) == {0}
    assert ancestors(parents, 0) == set()


def test_children_that_changed_different_components_merge_both_changes() -> None:
    plan = merge(SIBLINGS, SIBLING_PARENTS, [0.2, 0.5, 0.6], frontier=[2, 1])
    assert plan == MergePlan(
        i=1,
        j=2,
        ancestor=0,
        candidate={"a": "A1", "b": "B2"},
        sources={"a": "i", "b": "j"},
    )
    assert plan.key == (1, 2, 0)


@pytest.mark.parametrize(
    ("means", "expected"),
    [
        ([0.1, 0.7, 0.4], {"a": "A1", "b": "B1", "c": "C2"}),
        ([0.1, 0.4, 0.7], {"a": "A2", "b": "B1", "c": "C2"}),
    ],
)
def test_component_both_changed_takes_the_higher_scoring_text(
    means: list[float], expected: Candidate
) -> None:
    candidates = [
        {"a": "A0", "b": "B0", "c": "C0"},
        {"a": "A1", "b": "B1", "c": "C0"},
        {"a": "A2", "b": "B0", "c": "C2"},
    ]
    plan = merge(candidates, SIBLING_PARENTS, means, frontier=[1, 2])
    assert plan is not None
    assert plan.candidate == expected
    assert plan.sources == {"a": "i" if means[1] > means[2] else "j", "b": "i", "c": "j"}


def test_component_both_changed_with_tied_scores_is_decided_by_the_rng() -> None:
    candidates = [
        {"a": "A0", "b": "B0", "c": "C0"},
        {"a": "A1", "b": "B1", "c": "C0"},
        {"a": "A2", "b": "B0", "c": "C2"},
    ]
    picked = set()
    for seed in range(20):
        plan = merge(candidates, SIBLING_PARENTS, [0.1, 0.5, 0.5], frontier=[1, 2], seed=seed)
        assert plan is not None
        picked.add(plan.sources["a"])
    assert picked == {"i", "j"}


def test_a_candidate_and_its_own_descendant_are_never_merged() -> None:
    # 2 descends from 1; merging them over seed 0 would give the new {"a": "A1", "b": "B2"}.
    candidates = [{"a": "A0", "b": "B0"}, {"a": "A1", "b": "B0"}, {"a": "A2", "b": "B2"}]
    parents: list[tuple[int, ...]] = [(), (0,), (1,)]
    for seed in range(10):
        assert merge(candidates, parents, [0.1, 0.6, 0.5], frontier=[0, 1, 2], seed=seed) is None


def test_non_desirable_pair_without_a_one_sided_change_is_not_merged() -> None:
    # Both made the same change to "a" and rewrote "b" and "c" differently: neither lineage
    # holds a change the other lacks. With tied scores a merge could still mix texts (e.g.
    # {"a": "A1", "b": "B1", "c": "C2"}, in no pool slot); it must not.
    candidates = [
        {"a": "A0", "b": "B0", "c": "C0"},
        {"a": "A1", "b": "B1", "c": "C1"},
        {"a": "A1", "b": "B2", "c": "C2"},
    ]
    for seed in range(20):
        assert merge(candidates, SIBLING_PARENTS, [0.1, 0.5, 0.5], [1, 2], seed=seed) is None


def test_ancestor_scoring_above_a_descendant_is_not_merged_over() -> None:
    assert merge(SIBLINGS, SIBLING_PARENTS, [0.55, 0.5, 0.6], frontier=[1, 2]) is None
    assert merge(SIBLINGS, SIBLING_PARENTS, [0.5, 0.5, 0.6], frontier=[1, 2]) is not None


def test_merge_equal_to_a_pool_candidate_is_rejected() -> None:
    # Candidate 3 (off the frontier) already is what merging 1 and 2 would give.
    candidates = [*SIBLINGS, {"a": "A1", "b": "B2"}]
    parents = [*SIBLING_PARENTS, (1,)]
    assert merge(candidates, parents, [0.1, 0.5, 0.5, 0.3], frontier=[1, 2]) is None


# Seed 0 -> 1 (rewrote "a") -> 2 (rewrote "b") and 3 (rewrote "c"): 0 and 1 are both common
# ancestors of 2 and 3.
DEEP = [
    {"a": "A0", "b": "B0", "c": "C0"},
    {"a": "A1", "b": "B0", "c": "C0"},
    {"a": "A1", "b": "B2", "c": "C0"},
    {"a": "A1", "b": "B0", "c": "C3"},
]
DEEP_PARENTS: list[tuple[int, ...]] = [(), (0,), (1,), (1,)]


def test_tried_triples_are_skipped() -> None:
    means = [0.1, 0.3, 0.5, 0.5]
    plan = merge(DEEP, DEEP_PARENTS, means, frontier=[2, 3], tried={(2, 3, 1)})
    assert plan is not None
    assert plan.ancestor == 0
    assert plan.sources == {"a": "i", "b": "i", "c": "j"}
    assert merge(DEEP, DEEP_PARENTS, means, [2, 3], tried={(2, 3, 1), (2, 3, 0)}) is None
    assert merge(SIBLINGS, SIBLING_PARENTS, [0.1, 0.5, 0.5], [1, 2], tried={(1, 2, 0)}) is None


def test_common_ancestor_is_sampled_by_score() -> None:
    # Seed 0 scores 0, so it has no weight next to ancestor 1.
    assert chosen_ancestors([0.0, 0.3, 0.5, 0.5]) == {1}
    # All weights 0: uniform, and both ancestors turn up.
    assert chosen_ancestors([0.0, 0.0, 0.5, 0.5]) == {0, 1}


def chosen_ancestors(means: list[float]) -> set[int]:
    plans = [merge(DEEP, DEEP_PARENTS, means, [2, 3], seed=seed) for seed in range(20)]
    return {plan.ancestor for plan in plans if plan is not None} if all(plans) else set()


def test_same_seed_gives_the_same_merge_whatever_the_frontier_order() -> None:
    # Three children of a seed, each rewrote a different component: three valid pairs.
    candidates = [
        {"a": "A0", "b": "B0", "c": "C0"},
        {"a": "A1", "b": "B0", "c": "C0"},
        {"a": "A0", "b": "B2", "c": "C0"},
        {"a": "A0", "b": "B0", "c": "C3"},
    ]
    parents: list[tuple[int, ...]] = [(), (0,), (0,), (0,)]
    means = [0.1, 0.5, 0.5, 0.5]
    for seed in range(10):
        first = merge(candidates, parents, means, [1, 2, 3], seed=seed)
        assert first == merge(candidates, parents, means, [3, 1, 2], seed=seed)
    plans = [merge(candidates, parents, means, [1, 2, 3], seed=seed) for seed in range(30)]
    assert {(plan.i, plan.j) for plan in plans if plan is not None} == {(1, 2), (1, 3), (2, 3)}


# Ids 0-2: i wins; 3-5: j wins; 6-8: tie. Id 9 is scored for i only, id 10 for j only.
I_SCORES = {0: 1.0, 1: 1.0, 2: 1.0, 3: 0.0, 4: 0.0, 5: 0.0, 6: 0.5, 7: 0.5, 8: 0.5, 9: 1.0}
J_SCORES = {0: 0.0, 1: 0.0, 2: 0.0, 3: 1.0, 4: 1.0, 5: 1.0, 6: 0.5, 7: 0.5, 8: 0.5, 10: 1.0}
BUCKET = {0: "i", 1: "i", 2: "i", 3: "j", 4: "j", 5: "j", 6: "tie", 7: "tie", 8: "tie"}


@pytest.mark.parametrize(
    ("size", "expected"),
    [(2, {"i": 1, "j": 1}), (3, {"i": 1, "j": 1, "tie": 1}), (5, {"i": 2, "j": 2, "tie": 1})],
)
def test_subsample_is_stratified_by_who_wins(size: int, expected: dict[str, int]) -> None:
    for seed in range(10):
        ids = merge_subsample(I_SCORES, J_SCORES, size, random.Random(seed))
        assert len(ids) == len(set(ids)) == size
        assert Counter(BUCKET[k] for k in ids) == expected


def test_subsample_tops_up_from_other_buckets_and_stays_within_common_ids() -> None:
    few_i_wins = {**I_SCORES, 1: 0.0, 2: 0.0}  # ids 1, 2 now tie: only id 0 is an i win
    ids = merge_subsample(few_i_wins, J_SCORES, 6, random.Random(0))
    assert len(ids) == len(set(ids)) == 6 and 0 in ids
    everything = merge_subsample(I_SCORES, J_SCORES, 50, random.Random(0))
    assert sorted(everything) == list(range(9))
    assert merge_subsample(I_SCORES, J_SCORES, 0, random.Random(0)) == []


def test_subsample_is_deterministic_for_a_seeded_rng() -> None:
    draws = {tuple(merge_subsample(I_SCORES, J_SCORES, 4, random.Random(3))) for _ in range(5)}
    assert len(draws) == 1
    by_seed = {tuple(merge_subsample(I_SCORES, J_SCORES, 4, random.Random(s))) for s in range(10)}
    assert len(by_seed) > 1


@pytest.mark.parametrize(
    ("merged", "accepted"),
    [
        ({0: 1.0, 3: 1.0, 6: 0.0}, True),  # 2.0 beats both parents' 1.5
        ({0: 1.0, 3: 0.0, 6: 0.5}, True),  # 1.5 ties the better parent
        ({0: 1.0, 3: 0.0, 6: 0.25}, False),  # 1.25 is below it
        ({}, False),  # nothing measured
    ],
)
def test_merge_accepted_needs_at_least_the_better_parents_sum(
    merged: dict[int, float], accepted: bool
) -> None:
    # On ids {0, 3, 6}: i sums 1.5, j sums 1.5; id 9 (i only, score 1) must not count.
    assert merge_accepted(merged, I_SCORES, J_SCORES) is accepted


def test_merge_accepted_compares_against_the_better_parent_not_the_worse() -> None:
    i_scores, j_scores = {0: 1.0, 1: 1.0}, {0: 0.0, 1: 1.0}
    assert merge_accepted({0: 0.0, 1: 1.0}, i_scores, j_scores) is False
    assert merge_accepted({0: 1.0, 1: 1.0}, i_scores, j_scores) is True
