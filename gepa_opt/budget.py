"""Metric-call accounting: the paper's budget B counts rollouts, one per example evaluated."""

from __future__ import annotations

from dataclasses import dataclass


class BudgetExhausted(Exception):
    """Raised instead of launching an evaluation that would overshoot the budget."""


@dataclass
class Budget:
    """Charged before an evaluation is launched, so the limit can never be overshot.

    Charging up front (rather than on completion) is the seam for the concurrent engine:
    there, in-flight work must already be counted when the next evaluation asks to start.
    Reflection calls are counted too, but do not draw on `max_metric_calls`.
    """

    max_metric_calls: int
    metric_calls_used: int = 0
    reflection_calls: int = 0

    @property
    def remaining(self) -> int:
        return self.max_metric_calls - self.metric_calls_used

    def fits(self, metric_calls: int) -> bool:
        return metric_calls <= self.remaining

    def charge(self, metric_calls: int) -> None:
        if not self.fits(metric_calls):
            raise BudgetExhausted(
                f"{metric_calls} metric calls requested, {self.remaining} left "
                f"of {self.max_metric_calls}"
            )
        self.metric_calls_used += metric_calls

    def record_reflections(self, calls: int) -> None:
        self.reflection_calls += calls
