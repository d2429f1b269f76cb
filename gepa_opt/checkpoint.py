"""Where a run stands, saved so a killed run resumes it: the pool and budget (`snapshot.py`)
plus the engine's own position, and the journal's calls past the save (`journal.py`).

The engine saves when a group starts and when a proposal ends. Its position is the
sampler's queue, the stop rules' counters, the journal's length at the save and the
groups in flight (parent, minibatch, each child's iteration and components), so a
resumed run finishes those groups instead of abandoning what they paid for. Calls the
journal logged after the save count against the budget (those in flight at the kill
too), answered ones fill the cache, and reflections wait for the proposals they belong to.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from gepa_opt.budget import Budget
from gepa_opt.cache import EvaluationCache
from gepa_opt.journal import CallJournal
from gepa_opt.persistence import RunStore
from gepa_opt.snapshot import restore, snapshot_of
from gepa_opt.snapshot_json import decode_example_id, encode_example_id
from gepa_opt.state import GEPAState
from gepa_opt.types import Candidate, ExampleId


@dataclass(frozen=True)
class GroupInFlight:
    parent_idx: int
    minibatch: list[ExampleId]
    children: list[tuple[int, list[str]]]
    """Each child's (iteration, components)."""
    reused: bool = False
    """The minibatch is the one the parent won on (its next winner's group draws anew)."""


@dataclass(frozen=True)
class Position:
    sampler_queue: list[ExampleId]
    best_score: float
    since_improvement: int
    journal_offset: int
    groups: list[GroupInFlight]

    def to_json(self) -> dict[str, Any]:
        return {
            "sampler_queue": [encode_example_id(i) for i in self.sampler_queue],
            "best_score": self.best_score,
            "since_improvement": self.since_improvement,
            "journal_offset": self.journal_offset,
            "in_flight": [
                [
                    g.parent_idx,
                    [encode_example_id(i) for i in g.minibatch],
                    [[iteration, list(components)] for iteration, components in g.children],
                    g.reused,
                ]
                for g in self.groups
            ],
        }

    @classmethod
    def from_json(cls, extra: dict[str, Any]) -> Position:
        return cls(
            sampler_queue=[decode_example_id(i) for i in extra["sampler_queue"]],
            best_score=extra["best_score"],
            since_improvement=extra["since_improvement"],
            journal_offset=extra["journal_offset"],
            groups=[
                GroupInFlight(
                    parent_idx,
                    [decode_example_id(i) for i in minibatch],
                    [(iteration, list(components)) for iteration, components in children],
                    *reused,  # absent in runs saved before minibatches were reused
                )
                for parent_idx, minibatch, children, *reused in extra["in_flight"]
            ],
        )


@dataclass
class Saved:
    """A saved run as live objects."""

    state: GEPAState
    budget: Budget
    cache: EvaluationCache
    rngs: dict[str, random.Random]
    position: Position


def save_run(
    store: RunStore,
    state: GEPAState,
    budget: Budget,
    cache: EvaluationCache,
    rngs: dict[str, random.Random],
    position: Position,
) -> None:
    store.save(snapshot_of(state, budget, cache, rngs, extra=position.to_json()))


def load_run(store: RunStore, seed: Candidate) -> Saved | None:
    """The run saved in `store`, or None if nothing was saved (a fresh run, or one killed
    before the seed's valset pass was saved)."""
    snapshot = store.load()
    if snapshot is None:
        return None
    if snapshot.candidates[0] != seed:
        raise ValueError(
            f"{store.state_path}: its seed candidate is not this run's seed; "
            "use a new GEPAConfig.run_dir for a new run"
        )
    state, budget, cache, rngs = restore(snapshot)
    return Saved(state, budget, cache, rngs, Position.from_json(snapshot.extra))


def replay_journal(
    journal: CallJournal, offset: int, budget: Budget, cache: EvaluationCache
) -> dict[tuple[int, str], str]:
    """Apply the calls the journal logged from `offset` on to the budget and cache; return
    the texts proposed among them (reflections and demonstrations), by (iteration,
    component)."""
    replayed = journal.replay(offset)
    budget.metric_calls_used += replayed.paid
    budget.reflection_calls += len(replayed.reflections)  # made before the kill
    for key, evaluation in replayed.results.items():
        cache.put(*key, evaluation)
    return replayed.reflections | replayed.demonstrations
