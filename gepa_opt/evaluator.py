"""Budgeted, cached evaluation: the single path by which the engine runs the adapter."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from typing import Generic

from gepa_opt.budget import Budget
from gepa_opt.cache import CachedEvaluation, EvaluationCache, Split
from gepa_opt.types import (
    Adapter,
    Candidate,
    DataInst,
    EvaluationBatch,
    ExampleId,
    candidate_digest,
)

Example = tuple[ExampleId, DataInst]


class Evaluator(Generic[DataInst]):
    """Pays only for cache misses, and charges them before the adapter is called.

    Train-split evaluations always capture traces: any cached train pair can then seed a
    later reflection (a parent re-evaluated on a minibatch it already saw costs nothing),
    at no extra metric calls. Val evaluations only feed the Pareto fronts, so they don't.
    """

    def __init__(
        self,
        adapter: Adapter[DataInst],
        cache: EvaluationCache,
        budget: Budget,
        max_concurrency: int,
    ) -> None:
        self._adapter = adapter
        self._cache = cache
        self._budget = budget
        self._max_concurrency = max_concurrency

    def missing(self, candidate: Candidate, split: Split, examples: Sequence[Example]) -> int:
        """Metric calls an evaluation of these examples would cost now."""
        digest = candidate_digest(candidate)
        return sum(self._cache.get(digest, split, i) is None for i, _ in examples)

    async def evaluate(
        self, candidate: Candidate, split: Split, examples: Sequence[Example]
    ) -> tuple[EvaluationBatch, int]:
        """Return the batch aligned with `examples` and the metric calls it was charged."""
        digest = candidate_digest(candidate)
        traced = split is Split.TRAIN
        misses = [(i, x) for i, x in examples if self._cache.get(digest, split, i) is None]
        self._budget.charge(len(misses))
        if misses:
            fresh = await self._run(candidate, [x for _, x in misses], traced)
            for (example_id, _), evaluation in zip(misses, fresh, strict=True):
                self._cache.put(digest, split, example_id, evaluation)
        hits = [self._cache.get(digest, split, i) for i, _ in examples]
        batch = EvaluationBatch(
            outputs=[h.output for h in hits],
            scores=[h.score for h in hits],
            trajectories=[h.trajectory for h in hits] if traced else None,
        )
        return batch, len(misses)

    async def _run(
        self, candidate: Candidate, batch: list[DataInst], traced: bool
    ) -> list[CachedEvaluation]:
        """Split into at most `max_concurrency` contiguous slices evaluated concurrently.

        With the default of 1 the adapter gets the whole batch and owns its parallelism.
        """
        slices = _split(batch, min(self._max_concurrency, len(batch)))
        results = await asyncio.gather(
            *(self._adapter.evaluate(part, candidate, capture_traces=traced) for part in slices)
        )
        evaluations: list[CachedEvaluation] = []
        for part, result in zip(slices, results, strict=True):
            _check(result, len(part), traced)
            trajectories = result.trajectories if traced else [None] * len(part)
            evaluations.extend(
                CachedEvaluation(output=o, score=float(s), trajectory=t)
                for o, s, t in zip(result.outputs, result.scores, trajectories, strict=True)
            )
        return evaluations


def _split(batch: list[DataInst], parts: int) -> list[list[DataInst]]:
    size, extra = divmod(len(batch), parts)
    bounds = [i * size + min(i, extra) for i in range(parts + 1)]
    return [batch[bounds[i] : bounds[i + 1]] for i in range(parts)]


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
    bad = [s for s in result.scores if not isinstance(s, int | float) or math.isnan(s)]
    if bad:
        raise ValueError(f"adapter.evaluate returned non-numeric or NaN scores: {bad[:3]}")
