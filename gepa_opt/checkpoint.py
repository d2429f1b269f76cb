"""Where a run stands, saved so a killed run resumes it: the pool and budget (`snapshot.py`)
plus the engine's own position, and the journal's calls past the save (`journal.py`).

The engine saves when a group starts and when a proposal ends. Its position is the
sampler's queue, the stop rules' counters, the journal's length at the save and the
groups in flight (parent, minibatch, each child's iteration and components), so a
resumed run finishes those groups instead of abandoning what they paid for. Calls the
journal logged as sent after the save count against the budget (those in flight at the
kill too, asked again under that charge), answered ones fill the cache, and reflections
wait for the proposals they belong to.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gepa_opt.budget import Budget
from gepa_opt.cache import CacheKey, EvaluationCache
from gepa_opt.group import Draw, Plan
from gepa_opt.journal import CallJournal
from gepa_opt.persistence import RunStore
from gepa_opt.progress import Progress
from gepa_opt.sampling import EpochSampler
from gepa_opt.snapshot import restore, snapshot_of
from gepa_opt.snapshot_json import decode_example_id, encode_example_id
from gepa_opt.state import GEPAState
from gepa_opt.types import Candidate, DataInst, ExampleId

ResumedGroup = tuple[Draw, list[tuple[int, list[str]]]]
"""A group a kill interrupted: its draw, and each child's (iteration, components)."""


@dataclass(frozen=True)
class GroupInFlight:
    parent_idx: int
    minibatch: list[ExampleId]
    children: list[tuple[int, list[str]]]
    """Each child's (iteration, components)."""
    reused: bool = False
    """The minibatch is the one the parent won on (its next winner's group draws anew)."""


def groups_in_flight(groups: Iterable[list[Plan]]) -> list[GroupInFlight]:
    """The groups a save records, each by its children's plans: a continued group whose
    parent has no index yet is left out (its parent's group re-runs it)."""
    return [
        GroupInFlight(
            plans[0].draw.parent_idx,
            [i for i, _ in plans[0].draw.minibatch],
            [(plan.iteration, plan.components) for plan in plans],
            plans[0].draw.reused,
        )
        for plans in groups
        if plans[0].draw.known
    ]


def resumed_groups(
    position: Position, state: GEPAState, train_by_id: Mapping[ExampleId, DataInst]
) -> list[ResumedGroup]:
    """The groups a kill interrupted, drawn again as they were: they finish under their
    own numbers."""
    resumed = []
    for group in position.groups:
        index = asyncio.get_running_loop().create_future()
        index.set_result(group.parent_idx)
        minibatch = [(i, train_by_id[i]) for i in group.minibatch]
        parent = state.candidates[group.parent_idx]
        resumed.append((Draw(parent, minibatch, index, reused=group.reused), group.children))
    return resumed


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
) -> Resumed:
    """Apply the calls the journal logged from `offset` on to the budget and cache; return
    the texts proposed among them and the pairs paid for but never answered."""
    replayed = journal.replay(offset)
    budget.metric_calls_used += replayed.paid
    budget.reflection_calls += len(replayed.reflections)  # made before the kill
    for key, evaluation in replayed.results.items():
        cache.put(*key, evaluation)
    texts = replayed.reflections | replayed.demonstrations
    return Resumed(None, texts, replayed.unanswered, [])


@dataclass
class Resumed:
    """What a resume gives back to the engine."""

    saved: Saved | None
    """None: nothing was saved, and only the journal's spend carries over (a run killed
    before the seed's valset pass was saved had paid for it)."""
    journaled: dict[tuple[int, str], str]
    """The texts proposed after the save, by (iteration, component): `replay_journal`."""
    unanswered: set[CacheKey]
    """Pairs whose calls were in flight at a kill: charged, and asked again for free."""
    groups: list[ResumedGroup]


@dataclass(frozen=True)
class Checkpoints:
    """A run directory as the engine keeps it (`GEPAConfig.run_dir`): saved when a group
    starts and when a proposal ends, read back once when the run starts. The engine's
    own position comes from `rngs`, `sampler` and `progress`, restored in place."""

    store: RunStore
    journal: CallJournal
    rngs: dict[str, random.Random]
    sampler: EpochSampler
    progress: Progress

    def save(
        self,
        state: GEPAState,
        budget: Budget,
        cache: EvaluationCache,
        groups: Iterable[list[Plan]],
    ) -> None:
        """`groups`: the plans of each group in flight."""
        progress = self.progress
        position = Position(
            self.sampler.queue,
            progress.best_score,
            progress.since_improvement,
            self.journal.offset,
            groups_in_flight(groups),
        )
        save_run(self.store, state, budget, cache, self.rngs, position)

    def resume(
        self,
        seed: Candidate,
        budget: Budget,
        cache: EvaluationCache,
        train_by_id: Mapping[ExampleId, DataInst],
    ) -> Resumed:
        """The run saved here and the calls the journal logged after it; with nothing
        saved, the journal's calls are applied to the fresh `budget` and `cache`. A
        resume takes the budget limits of `budget` (it may extend them)."""
        saved = load_run(self.store, seed)
        if saved is None:
            return replay_journal(self.journal, 0, budget, cache)
        position = saved.position
        saved.budget.max_metric_calls = budget.max_metric_calls
        saved.budget.max_reflection_calls = budget.max_reflection_calls
        for name, rng in self.rngs.items():
            rng.setstate(saved.rngs[name].getstate())
        self.sampler.queue = position.sampler_queue
        self.progress.best_score = position.best_score
        self.progress.since_improvement = position.since_improvement
        replayed = replay_journal(self.journal, position.journal_offset, saved.budget, saved.cache)
        groups = resumed_groups(position, saved.state, train_by_id)
        return Resumed(saved, replayed.journaled, replayed.unanswered, groups)
