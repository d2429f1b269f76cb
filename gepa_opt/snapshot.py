"""A run's resumable state as plain data, and its conversion to and from the live objects.

The engine takes a `snapshot_of` its objects after each finished evaluation batch and hands
it to `RunStore.save`; after a crash, `restore(store.load())` rebuilds them. Every
(candidate, split, example) pair in the restored cache was already charged to the restored
budget, so the resumed run pays for none of them again.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from gepa_opt.budget import Budget
from gepa_opt.cache import CachedEvaluation, CacheKey, EvaluationCache
from gepa_opt.state import GEPAState, ProposalRecord
from gepa_opt.types import Candidate, ExampleId

RngState = tuple[Any, ...]
"""What `random.Random.getstate()` returns."""


class _Unpersisted(Enum):
    MARKER = "not_persisted"

    def __repr__(self) -> str:
        return "NOT_PERSISTED"


NOT_PERSISTED = _Unpersisted.MARKER
"""Restored in place of an output or trajectory that was not plain JSON and so was not saved.

Its score was saved, so the pair is never paid for again; a reflection that needs the lost
trajectory must decide for itself whether re-running the example is worth a metric call.
"""


@dataclass
class RunSnapshot:
    """Everything a resumed run needs, in plain Python types (candidate texts included)."""

    candidates: list[Candidate]
    parents: list[tuple[int, ...]]
    val_scores: list[dict[ExampleId, float]]
    val_objective_scores: list[dict[ExampleId, dict[str, float]]]
    component_cursor: list[int]
    history: list[ProposalRecord]
    iteration: int
    idle_iterations: int
    merges_tried: list[tuple[int, int, int]]
    merges_due: int
    max_metric_calls: int
    metric_calls_used: int
    reflection_calls: int
    failed_calls: int
    rng_states: dict[str, RngState]
    """Per named `random.Random` stream, its `getstate()`."""
    cache: dict[CacheKey, CachedEvaluation]
    extra: dict[str, Any] = field(default_factory=dict)
    """Engine-owned plain JSON (e.g. a sampler's queue, with ids from `encode_example_id`)."""


def snapshot_of(
    state: GEPAState,
    budget: Budget,
    cache: EvaluationCache,
    rngs: Mapping[str, random.Random],
    extra: Mapping[str, Any] | None = None,
) -> RunSnapshot:
    """Copy the live objects, so the run can go on mutating them while the copy is saved."""
    return RunSnapshot(
        candidates=[dict(candidate) for candidate in state.candidates],
        parents=[tuple(parents) for parents in state.parents],
        val_scores=[dict(scores) for scores in state.val_scores],
        val_objective_scores=[
            {i: dict(objectives) for i, objectives in scores.items()}
            for scores in state.val_objective_scores
        ],
        component_cursor=list(state.component_cursor),
        history=list(state.history),
        iteration=state.iteration,
        idle_iterations=state.idle_iterations,
        merges_tried=list(state.merges_tried),
        merges_due=state.merges_due,
        max_metric_calls=budget.max_metric_calls,
        metric_calls_used=budget.metric_calls_used,
        reflection_calls=budget.reflection_calls,
        failed_calls=budget.failed_calls,
        rng_states={name: rng.getstate() for name, rng in rngs.items()},
        cache=dict(cache.items()),
        extra=copy.deepcopy(dict(extra or {})),
    )


def restore(
    snapshot: RunSnapshot,
) -> tuple[GEPAState, Budget, EvaluationCache, dict[str, random.Random]]:
    """Fresh live objects equal to the ones the snapshot was taken of."""
    state = GEPAState()
    pool = zip(
        snapshot.candidates,
        snapshot.parents,
        snapshot.val_scores,
        snapshot.val_objective_scores,
        strict=True,
    )
    for candidate, parents, val_scores, objectives in pool:
        state.add(candidate, parents, val_scores, objectives)  # also rebuilds the dup index
    if len(snapshot.component_cursor) != len(snapshot.candidates):
        raise ValueError(
            f"RunSnapshot.component_cursor has {len(snapshot.component_cursor)} entries "
            f"for {len(snapshot.candidates)} candidates"
        )
    state.component_cursor[:] = snapshot.component_cursor
    state.history = list(snapshot.history)
    state.iteration = snapshot.iteration
    state.idle_iterations = snapshot.idle_iterations
    state.merges_tried = [tuple(t) for t in snapshot.merges_tried]
    state.merges_due = snapshot.merges_due
    budget = Budget(
        max_metric_calls=snapshot.max_metric_calls,
        metric_calls_used=snapshot.metric_calls_used,
        reflection_calls=snapshot.reflection_calls,
        failed_calls=snapshot.failed_calls,
    )
    cache = EvaluationCache()
    for (digest, split, example_id), evaluation in snapshot.cache.items():
        cache.put(digest, split, example_id, evaluation)
    rngs: dict[str, random.Random] = {}
    for name, rng_state in snapshot.rng_states.items():
        rngs[name] = random.Random()
        rngs[name].setstate(rng_state)
    return state, budget, cache, rngs
