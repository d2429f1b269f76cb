"""System-aware Merge (the GEPA paper's appendix B): crossover of two lineages.

Two Pareto-front candidates that descend from a common ancestor along separate lineages
may have improved *different* components; taking each one's changed texts gives a
candidate that holds both lessons. Everything here is pure: the caller owns the pool, the
`tried` set, the evaluation of the merged candidate and its admission.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from gepa_opt.pareto import Scores, aggregate
from gepa_opt.types import Candidate, ExampleId

Source = Literal["i", "j", "ancestor"]


@dataclass(frozen=True)
class MergePlan:
    """A merged candidate and where each of its components came from (i < j)."""

    i: int
    j: int
    ancestor: int
    candidate: Candidate
    sources: dict[str, Source]

    @property
    def key(self) -> tuple[int, int, int]:
        """The triple to add to `tried` so this merge is not proposed again."""
        return (self.i, self.j, self.ancestor)


def ancestors(parents: Sequence[tuple[int, ...]], idx: int) -> set[int]:
    """Every pool index reachable through `parents` from `idx`, excluding `idx` itself."""
    found: set[int] = set()
    stack = list(parents[idx])
    while stack:
        k = stack.pop()
        if k not in found:
            found.add(k)
            stack.extend(parents[k])
    return found


def find_merge(
    candidates: Sequence[Candidate],
    parents: Sequence[tuple[int, ...]],
    val_scores: Sequence[Scores],
    rng: random.Random,
    tried: set[tuple[int, int, int]],
    frontier: Sequence[int],
) -> MergePlan | None:
    """Pick an untried, desirable merge of two `frontier` candidates, or None if none exists.

    Pairs are visited in an rng-shuffled order (the paper samples them at random) but
    exhaustively, so None means no pair qualifies rather than "unlucky draws". A common
    ancestor `a` qualifies when (i, j, a) is untried, its aggregate is not above the weaker
    of i and j (the paper's line 7: if a beats a descendant, that lineage's changes are
    suspect) and some component was changed by exactly one of i, j. Among those, ancestors
    are tried in an order sampled by aggregate score, as upstream does: untouched
    components come from the ancestor, so a stronger base is the better bet. A merge equal
    to a pool candidate (i and j included) is skipped in favour of the next ancestor/pair.
    """
    means = [aggregate(scores) for scores in val_scores]
    pairs = list(itertools.combinations(sorted(set(frontier)), 2))
    rng.shuffle(pairs)
    for i, j in pairs:
        ancestors_i, ancestors_j = ancestors(parents, i), ancestors(parents, j)
        if i in ancestors_j or j in ancestors_i:
            continue
        eligible = [
            a
            for a in sorted(ancestors_i & ancestors_j)
            if (i, j, a) not in tried
            and means[a] <= min(means[i], means[j])
            and _is_desirable(candidates[a], candidates[i], candidates[j])
        ]
        for a in _score_weighted_order(eligible, means, rng):
            merged, sources = _combine(candidates, means, a, i, j, rng)
            if merged not in candidates:
                return MergePlan(i, j, a, merged, sources)
    return None


def _is_desirable(ancestor: Candidate, ci: Candidate, cj: Candidate) -> bool:
    """Some component changed on one side only: otherwise the merge adds nothing new."""
    return any((ci[c] == text) != (cj[c] == text) for c, text in ancestor.items())


def _score_weighted_order(
    ancestor_ids: list[int], means: list[float], rng: random.Random
) -> list[int]:
    """Sample without replacement ∝ aggregate score (uniformly when every weight is 0)."""
    remaining, order = list(ancestor_ids), []
    while remaining:
        weights = [means[a] for a in remaining]
        if sum(weights) > 0:
            pick = rng.choices(range(len(remaining)), weights=weights)[0]
        else:
            pick = rng.randrange(len(remaining))
        order.append(remaining.pop(pick))
    return order


def _combine(
    candidates: Sequence[Candidate], means: list[float], a: int, i: int, j: int, rng: random.Random
) -> tuple[Candidate, dict[str, Source]]:
    """Per component: the one-sided change; if both changed it differently, the better
    candidate's text (rng on a tie); identical changes count as i's; else the ancestor's."""
    ancestor, ci, cj = candidates[a], candidates[i], candidates[j]
    sources: dict[str, Source] = {}
    for c, base in ancestor.items():
        i_changed, j_changed = ci[c] != base, cj[c] != base
        if i_changed and j_changed and ci[c] != cj[c]:
            if means[i] != means[j]:
                sources[c] = "i" if means[i] > means[j] else "j"
            else:
                sources[c] = rng.choice(("i", "j"))
        elif i_changed:
            sources[c] = "i"
        elif j_changed:
            sources[c] = "j"
        else:
            sources[c] = "ancestor"
    texts = {"i": ci, "j": cj, "ancestor": ancestor}
    return {c: texts[source][c] for c, source in sources.items()}, sources


def merge_subsample(
    val_scores_i: Scores, val_scores_j: Scores, size: int, rng: random.Random
) -> list[ExampleId]:
    """Up to `size` distinct ids scored for both, stratified: ~a third where i beats j, a
    third where j beats i, then ties, topped up from any leftover id.

    The merge claims to keep both lineages' strengths, so the cheap check must look where
    each parent wins; ties show whether it broke what they share. Ids keep `val_scores_i`'s
    order before sampling, so a seeded rng gives the same subsample on every run.
    """
    common = [k for k in val_scores_i if k in val_scores_j]
    i_wins = [k for k in common if val_scores_i[k] > val_scores_j[k]]
    j_wins = [k for k in common if val_scores_j[k] > val_scores_i[k]]
    ties = [k for k in common if val_scores_i[k] == val_scores_j[k]]
    per_bucket = max(1, math.ceil(size / 3))
    chosen: list[ExampleId] = []
    for bucket in (i_wins, j_wins, ties):
        take = min(len(bucket), per_bucket, size - len(chosen))
        if take > 0:
            chosen += rng.sample(bucket, take)
    leftover = [k for k in common if k not in chosen]
    shortfall = min(size - len(chosen), len(leftover))
    if shortfall > 0:
        chosen += rng.sample(leftover, shortfall)
    return chosen


def merge_accepted(merged_scores: Scores, i_scores: Scores, j_scores: Scores) -> bool:
    """Admit the merge when its sum over its subsample ids is >= both parents' sums there.

    At least as good as the better parent, not strictly better (unlike mutation): the merge
    is made of texts that already earned their place, and on a few ids ties are common, so
    a strict test would throw away merges that match the best parent; the full val
    evaluation that follows decides. An empty subsample proves nothing and is rejected.
    """
    if not merged_scores:
        return False
    ids = list(merged_scores)
    best_parent = max(sum(i_scores[k] for k in ids), sum(j_scores[k] for k in ids))
    return sum(merged_scores.values()) >= best_parent
