"""The val score matrix: per-key Pareto fronts and dominance (the paper's Algorithm 2).

Candidate k's scores are a mapping frontier key -> score. In the paper every key is a val
instance (an example id); `frontier_scores` builds the other frontiers of
`GEPAConfig.frontier`, whose keys are named objectives (an `Objective`) or both. Every
function below works over whatever keys it is given.

Which candidates stay parents (`Pruning`):
- "dominance" (the paper's text): a candidate is removed when *another single* candidate
  scores at least as well on every key and strictly better on one. A strict partial
  order, so the iterative removal always ends at the same set (the maximal candidates).
- "coverage" (upstream gepa's code): a candidate is removed when every front it is on
  also holds some other survivor, lowest aggregate first. It prunes more (a candidate that
  only ties others everywhere goes), so fewer, stronger parents share the draws.
On both benchmark tasks (`benchmarks/gepa_vs_upstream.py`, docs/benchmarks/gepa-*.md) the
two rules ended on the same candidates, so the default (`GEPAConfig.parent_pruning`) follows
upstream.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from gepa_opt.types import ExampleId

FrontierKey = Hashable
"""A val example id, or an `Objective`."""

Scores = Mapping[FrontierKey, float]

ObjectiveScores = Mapping[ExampleId, Mapping[str, float]]
"""One candidate's val objective scores: example id -> {objective name: score}."""

Frontier = Literal["instances", "objectives", "both"]
Pruning = Literal["dominance", "coverage"]


@dataclass(frozen=True, order=True)
class Objective:
    """Frontier key of a named objective (its valset mean); never equal to an example id."""

    name: str


def aggregate(scores: Scores) -> float:
    """Mean over instances: what the paper returns the best candidate by."""
    return sum(scores.values()) / len(scores) if scores else 0.0


def best_index(val_scores: Sequence[Scores]) -> int:
    """Highest aggregate; the earliest candidate wins ties (the seed before its children)."""
    aggregates = [aggregate(s) for s in val_scores]
    return aggregates.index(max(aggregates))


def objective_means(objective_scores: ObjectiveScores) -> dict[str, float]:
    """Per named objective, its mean over the examples that report it (sorted by name)."""
    totals: dict[str, list[float]] = {}
    for scores in objective_scores.values():
        for name, score in scores.items():
            totals.setdefault(name, []).append(score)
    return {name: sum(v) / len(v) for name, v in sorted(totals.items())}


def frontier_scores(
    val_scores: Sequence[Scores], objective_scores: Sequence[ObjectiveScores], frontier: Frontier
) -> list[dict[FrontierKey, float]]:
    """Per candidate, its score on each key of the chosen frontier: per val instance
    ("instances", the paper's), per named objective's valset mean ("objectives"), or the
    union of both keys ("both")."""
    if frontier not in ("instances", "objectives", "both"):
        raise ValueError(f"unknown frontier {frontier!r}")
    rows: list[dict[FrontierKey, float]] = []
    for instances, objectives in zip(val_scores, objective_scores, strict=True):
        row: dict[FrontierKey, float] = {} if frontier == "objectives" else dict(instances)
        if frontier != "instances":
            row.update({Objective(k): v for k, v in objective_means(objectives).items()})
        rows.append(row)
    return rows


def instance_fronts(val_scores: Sequence[Scores]) -> dict[FrontierKey, frozenset[int]]:
    """P*[i]: every candidate reaching the best score s*[i] on key i (ties all count)."""
    fronts: dict[FrontierKey, frozenset[int]] = {}
    instances = dict.fromkeys(i for scores in val_scores for i in scores)
    for instance in instances:
        scored = {k: s[instance] for k, s in enumerate(val_scores) if instance in s}
        best = max(scored.values())
        fronts[instance] = frozenset(k for k, score in scored.items() if score == best)
    return fronts


def dominates(a: Scores, b: Scores) -> bool:
    """`a` is at least as good as `b` everywhere `b` was scored, and better somewhere."""
    at_least = all(i in a and a[i] >= score for i, score in b.items())
    return at_least and any(a[i] > score for i, score in b.items())


def dominated(
    val_scores: Sequence[Scores], fronts: Mapping[FrontierKey, frozenset[int]]
) -> set[int]:
    """D of Algorithm 2, built one candidate at a time exactly as written."""
    pool = sorted(set().union(*fronts.values()))
    removed: set[int] = set()
    while True:
        alive = [k for k in pool if k not in removed]
        victim = next(
            (
                k
                for k in alive
                if any(dominates(val_scores[o], val_scores[k]) for o in alive if o != k)
            ),
            None,
        )
        if victim is None:
            return removed
        removed.add(victim)


def covered(val_scores: Sequence[Scores], fronts: Mapping[FrontierKey, frozenset[int]]) -> set[int]:
    """Upstream gepa's removal: lowest aggregate first (ties in order of first appearance
    on the fronts, as upstream has them), drop a candidate while every front it is on
    holds another candidate still kept. One pass is enough: a removal only makes later
    removals harder, so no candidate passed over could become removable."""
    seen = dict.fromkeys(k for front in fronts.values() for k in sorted(front))
    pool = sorted(seen, key=lambda k: aggregate(val_scores[k]))
    removed: set[int] = set()
    for victim in pool:
        alive = set(pool) - removed - {victim}
        if all(front & alive for front in fronts.values() if victim in front):
            removed.add(victim)
    return removed


def win_counts(val_scores: Sequence[Scores], pruning: Pruning = "dominance") -> dict[int, int]:
    """f[Φ] of Algorithm 2: on how many keys (instances) each kept candidate is best."""
    fronts = instance_fronts(val_scores)
    removed = (covered if pruning == "coverage" else dominated)(val_scores, fronts)
    counts: dict[int, int] = {}
    for front in fronts.values():
        for k in sorted(front - removed):
            counts[k] = counts.get(k, 0) + 1
    return dict(sorted(counts.items()))


def frontier_score(val_scores: Sequence[Scores]) -> float:
    """Mean of s*[i]: what picking the right candidate per instance would score."""
    fronts = instance_fronts(val_scores)
    best = [max(s[i] for s in val_scores if i in s) for i in fronts]
    return sum(best) / len(best) if best else 0.0
