"""The run's metric calls as its parts make them: at the priority their proposal earns,
each charge announced, and a winner's valset pass reserved only once it can be paid.

`Evaluator` knows the cache, the journal and the budget reservations, and nothing of
proposals; this is where an evaluation learns whose it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gepa_opt.announcer import Announcer
from gepa_opt.budget import Budget, Reservation
from gepa_opt.cache import EvaluationCache, Split
from gepa_opt.evaluator import Evaluator, Example
from gepa_opt.priority import priority
from gepa_opt.types import Candidate, EvaluationBatch


@dataclass(frozen=True)
class MetricCalls:
    evaluator: Evaluator
    budget: Budget
    announcer: Announcer
    valset: Sequence[Example]

    @property
    def cache(self) -> EvaluationCache:
        return self.evaluator.cache

    def missing(self, candidate: Candidate, split: Split, examples: Sequence[Example]) -> int:
        """Metric calls an evaluation of these examples could cost now (at most)."""
        return self.evaluator.missing(candidate, split, examples)

    async def evaluate(
        self,
        candidate: Candidate,
        split: Split,
        examples: Sequence[Example],
        reservation: Reservation,
        iteration: int = 0,
    ) -> EvaluationBatch:
        """Its calls wait for slots in the order `priority` gives."""
        batch, charged = await self.evaluator.evaluate(
            candidate, split, examples, reservation, priority=priority(iteration, split)
        )
        if charged:  # no save here: the journal already holds every call and answer
            await self.announcer.budget_used(iteration, metric_calls=charged, reflection_calls=0)
        return batch

    async def reserve_valset(self, child: Candidate) -> Reservation | None:
        """A valset pass for an accepted child, once it fits; None if it never can (no
        other work in flight holds metric calls it could give back)."""
        need = self.evaluator.missing(child, Split.VAL, self.valset)
        while not self.budget.fits(need):
            if self.budget.reserved == 0:
                return None
            await self.budget.freed()
        return self.budget.reserve(need)
