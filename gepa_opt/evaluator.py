"""Budgeted, cached evaluation: the single path by which the engine runs the adapter."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterable, Sequence
from typing import Generic

from gepa_opt.budget import Reservation
from gepa_opt.cache import CachedEvaluation, CacheKey, EvaluationCache, Split
from gepa_opt.journal import CallJournal
from gepa_opt.snapshot import NOT_PERSISTED
from gepa_opt.types import (
    Adapter,
    CallFailed,
    Candidate,
    DataInst,
    EvaluationBatch,
    ExampleId,
    candidate_digest,
)
from gepa_opt.workers import Priority, WorkerPool

Example = tuple[ExampleId, DataInst]


class Evaluator(Generic[DataInst]):
    """Pays only for cache misses, each charged to the caller's reservation when its call
    is sent (its worker slot granted), and journaled as paid right then: a call waiting
    for a slot at a kill was never made, one in flight was.

    Each uncached example is one adapter call holding one worker slot, so concurrent
    proposals share the pool example by example. A pair another proposal is computing
    right now is awaited, not paid again.

    A call that raises `CallFailed` is tried again, up to `attempts` tries in all; an
    example that fails every one gives its charge back and makes `evaluate` raise
    `CallFailed` naming it, once the batch's other examples are done (and cached).

    A pair is charged once. One charged but never answered (`unanswered`: in flight when
    a run was killed, or cancelled) is asked again under that charge, and keeps it if it
    fails: the call that was lost was made.

    Train-split evaluations always capture traces: any cached train pair can then seed a
    later reflection (a parent re-evaluated on a minibatch it already saw costs nothing),
    at no extra metric calls. Val evaluations only feed the Pareto fronts, so they don't.
    """

    def __init__(
        self,
        adapter: Adapter[DataInst],
        cache: EvaluationCache,
        workers: WorkerPool,
        journal: CallJournal | None = None,
        attempts: int = 1,
        unanswered: Iterable[CacheKey] = (),
    ):
        self._adapter = adapter
        self._attempts = attempts
        self._cache = cache
        self._workers = workers
        self.journal = journal
        """Where each paid call and each answer is logged (`journal.py`); None: nowhere."""
        self._in_flight: dict[CacheKey, asyncio.Future[None]] = {}
        self._unanswered = set(unanswered)  # charged, no answer yet: paid for already

    @property
    def cache(self) -> EvaluationCache:
        return self._cache

    def missing(self, candidate: Candidate, split: Split, examples: Sequence[Example]) -> int:
        """Metric calls an evaluation of these examples could cost now (at most)."""
        digest = candidate_digest(candidate)
        traced = split is Split.TRAIN
        return sum(
            not self._usable(self._cache.get(digest, split, i), traced)
            and not self._prepaid((digest, split, i))
            for i, _ in examples
        )

    def _prepaid(self, key: CacheKey) -> bool:
        """Charged and lost: asking it costs nothing more. One in flight now is counted as
        a cost all the same, since a call that fails for good gives its charge back."""
        return key in self._unanswered and key not in self._in_flight

    @staticmethod
    def _usable(hit: CachedEvaluation | None, traced: bool) -> bool:
        """A resumed run lost the trajectories that were not plain JSON: reflection needs
        them, so such a train pair is run (and paid for) again."""
        return hit is not None and not (traced and hit.trajectory is NOT_PERSISTED)

    async def evaluate(
        self,
        candidate: Candidate,
        split: Split,
        examples: Sequence[Example],
        reservation: Reservation,
        priority: Priority = 0,
    ) -> tuple[EvaluationBatch, int]:
        """Return the batch aligned with `examples` and the metric calls it was charged;
        its calls wait for worker slots at `priority` (lower first)."""
        digest = candidate_digest(candidate)
        traced = split is Split.TRAIN
        mine: dict[CacheKey, DataInst] = {}
        theirs: dict[CacheKey, asyncio.Future[None]] = {}
        for example_id, example in examples:
            key = (digest, split, example_id)
            if self._usable(self._cache.get(*key), traced):
                continue
            if key in self._in_flight:
                theirs[key] = self._in_flight[key]
            else:
                mine.setdefault(key, example)
        charged: set[CacheKey] = set()  # by this evaluation, as its calls are sent
        loop = asyncio.get_running_loop()
        for key in mine:
            self._in_flight[key] = loop.create_future()
        try:
            answered = await asyncio.gather(
                *(
                    self._run_one(candidate, key, x, traced, priority, reservation, charged)
                    for key, x in mine.items()
                )
            )
        finally:
            for key in mine:
                future = self._in_flight.pop(key)
                if not future.done():  # we failed or were cancelled: waiters must not hang
                    future.set_exception(CallFailed(f"evaluation of {key[1]} {key[2]} failed"))
                    future.exception()  # retrieved: only the waiters need it
        failed = [key for key, ok in zip(mine, answered, strict=True) if not ok]
        outcomes = await asyncio.gather(*theirs.values(), return_exceptions=True)
        for key, outcome in zip(theirs, outcomes, strict=True):
            if isinstance(outcome, CallFailed):
                failed.append(key)
            elif isinstance(outcome, BaseException):
                raise outcome
        if failed:
            ids = [key[2] for key in failed]
            raise CallFailed(f"{split.value} examples {ids} failed in {self._attempts} tries each")
        hits = [self._cache.get(digest, split, i) for i, _ in examples]
        with_objectives = any(h.objective_scores is not None for h in hits)
        batch = EvaluationBatch(
            outputs=[h.output for h in hits],
            scores=[h.score for h in hits],
            trajectories=[h.trajectory for h in hits] if traced else None,
            objective_scores=[dict(h.objective_scores or {}) for h in hits]
            if with_objectives
            else None,
        )
        return batch, len(charged)

    async def _run_one(
        self,
        candidate: Candidate,
        key: CacheKey,
        example: DataInst,
        traced: bool,
        priority: Priority,
        reservation: Reservation,
        charged: set[CacheKey],
    ) -> bool:
        """Run one example, tried again while it raises `CallFailed`; False if every try
        did (`evaluate` then fails its waiters too)."""
        for _ in range(self._attempts):
            try:
                result = await self._workers.run(
                    self._send(candidate, key, example, traced, reservation, charged), priority
                )
                break
            except CallFailed:
                reservation.budget.failed_calls += 1
        else:
            if key in charged:  # no result: no charge (a lost call's charge stands)
                charged.remove(key)
                self._unanswered.discard(key)
                reservation.refund(1)
                if self.journal is not None:
                    self.journal.failed(key)
            return False
        _check(result, 1, traced)
        trajectory = result.trajectories[0] if traced else None
        objectives = None
        if result.objective_scores is not None:
            objectives = {name: float(v) for name, v in result.objective_scores[0].items()}
        evaluation = CachedEvaluation(
            result.outputs[0], float(result.scores[0]), trajectory, objectives
        )
        self._cache.put(*key, evaluation)
        self._unanswered.discard(key)
        if self.journal is not None:
            self.journal.done(key, evaluation)
        future = self._in_flight.get(key)
        if future is not None and not future.done():  # done: a sibling failed first
            future.set_result(None)
        return True

    async def _send(
        self,
        candidate: Candidate,
        key: CacheKey,
        example: DataInst,
        traced: bool,
        reservation: Reservation,
        charged: set[CacheKey],
    ) -> EvaluationBatch:
        """One try, run once its worker slot is granted: only now is the call made, so
        only now is it charged and journaled (a kill from here on cannot hide it)."""
        if key not in self._unanswered:
            reservation.charge(1)
            charged.add(key)
            self._unanswered.add(key)
            if self.journal is not None:
                self.journal.paid([key])
        return await self._adapter.evaluate([example], candidate, capture_traces=traced)


def _check(result: EvaluationBatch, expected: int, traced: bool) -> None:
    """Fail loudly on a misaligned batch: a silent misalignment would corrupt every score."""
    if len(result.outputs) != expected or len(result.scores) != expected:
        raise ValueError(
            f"adapter.evaluate returned {len(result.outputs)} outputs and "
            f"{len(result.scores)} scores for a batch of {expected} examples"
        )
    if traced and (result.trajectories is None or len(result.trajectories) != expected):
        got = "None" if result.trajectories is None else len(result.trajectories)
        raise ValueError(
            f"adapter.evaluate(capture_traces=True) returned trajectories={got} "
            f"for a batch of {expected} examples"
        )
    bad = [s for s in result.scores if not _is_score(s)]
    if bad:
        raise ValueError(f"adapter.evaluate returned non-numeric or NaN scores: {bad[:3]}")
    if result.objective_scores is None:
        return
    if len(result.objective_scores) != expected:
        raise ValueError(
            f"adapter.evaluate returned {len(result.objective_scores)} objective_scores "
            f"for a batch of {expected} examples"
        )
    for objectives in result.objective_scores:
        if not isinstance(objectives, dict) or not all(
            isinstance(name, str) and _is_score(v) for name, v in objectives.items()
        ):
            raise ValueError(
                "adapter.evaluate returned objective_scores that are not a dict of "
                f"str name -> numeric score per example: {objectives!r}"
            )


def _is_score(value: object) -> bool:
    return isinstance(value, int | float) and not math.isnan(value)
