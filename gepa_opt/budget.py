"""Metric-call accounting: the paper's budget B counts rollouts, one per example evaluated."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field


class BudgetExhausted(Exception):
    """Raised instead of launching an evaluation that would overshoot the budget."""


@dataclass
class Budget:
    """Work is reserved before it is launched, so the limit holds at any concurrency.

    A proposal reserves its minibatch work (parent's uncached minibatch, child's
    minibatch) before it starts and a valset pass only once its child is accepted, charges
    what it really runs against those reservations, and releases the rest when it ends.
    Reflection calls have a limit of their own, `max_reflection_calls` (None: counted
    only): a proposal reserves its reflections when it is planned, as it does metric calls.
    """

    max_metric_calls: int
    metric_calls_used: int = 0
    reserved: int = 0
    reflection_calls: int = 0
    max_reflection_calls: int | None = None
    reflections_reserved: int = 0
    failed_calls: int = 0
    """Tries of an example or a reflection that raised `CallFailed`: counted, not charged."""
    _freed: asyncio.Event = field(default_factory=asyncio.Event, repr=False, compare=False)

    @property
    def remaining(self) -> int:
        return self.max_metric_calls - self.metric_calls_used - self.reserved

    def fits(self, metric_calls: int) -> bool:
        return metric_calls <= self.remaining

    def reserve(self, metric_calls: int) -> Reservation:
        if not self.fits(metric_calls):
            raise BudgetExhausted(
                f"{metric_calls} metric calls requested, {self.remaining} left of "
                f"{self.max_metric_calls} ({self.reserved} reserved by work in flight)"
            )
        self.reserved += metric_calls
        return Reservation(self, metric_calls)

    def reflections_left(self) -> int | None:
        """Reflection calls not yet made or reserved; None when they are not limited."""
        if self.max_reflection_calls is None:
            return None
        return self.max_reflection_calls - self.reflection_calls - self.reflections_reserved

    def reserve_reflections(self, calls: int) -> ReflectionHold:
        """Set aside a planned proposal's reflections. Planning checks `reflections_left`
        first; a group resumed after a kill takes back what it had, even past the limit."""
        self.reflections_reserved += calls
        return ReflectionHold(self, calls)

    async def freed(self) -> None:
        """Return once some reservation has ended (and given back what it did not use)."""
        await self._freed.wait()

    def _give_back(self, metric_calls: int) -> None:
        # Wake every waiter, even when nothing is given back: a waiter also needs to learn
        # that work in flight has ended, so that none is left to give any back.
        self.reserved -= metric_calls
        self._freed.set()
        self._freed = asyncio.Event()


@dataclass
class Reservation:
    """Metric calls set aside for one piece of work; `release` returns what it didn't use."""

    budget: Budget
    left: int

    def charge(self, metric_calls: int) -> None:
        if metric_calls > self.left:  # a bug in the worst-case estimate, never the caller's
            raise BudgetExhausted(f"{metric_calls} metric calls charged, {self.left} reserved")
        self.left -= metric_calls
        self.budget.reserved -= metric_calls
        self.budget.metric_calls_used += metric_calls

    def refund(self, metric_calls: int) -> None:
        """Take back charges for calls that failed for good: they produced no result."""
        self.left += metric_calls
        self.budget.reserved += metric_calls
        self.budget.metric_calls_used -= metric_calls

    def release(self) -> None:
        self.budget._give_back(self.left)
        self.left = 0


@dataclass
class ReflectionHold:
    """Reflection calls set aside for one proposal; `release` returns what it didn't make
    (a perfect parent, texts the journal already held, a failure)."""

    budget: Budget
    left: int

    def charge(self, calls: int) -> None:
        self.left -= calls
        self.budget.reflections_reserved -= calls
        self.budget.reflection_calls += calls

    def release(self) -> None:
        self.budget.reflections_reserved -= self.left
        self.left = 0
