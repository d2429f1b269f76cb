"""How far the run has come, as the stop rules read it, and the stop reasons the engine
decides itself (budget spent, too many failed calls, stalled).

`StopRules.check` is pure (`stopping.py`); this is the bookkeeping it reads: the best
score so far and the proposals since it rose, kept as proposals finish. Both are part of
a saved run's position (`checkpoint.Position`), so a resumed run stops where the
uninterrupted one would.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from gepa_opt.budget import Budget
from gepa_opt.config import GEPAConfig
from gepa_opt.events import MergeTried, StopReason
from gepa_opt.pareto import aggregate, best_index
from gepa_opt.state import GEPAState, ProposalRecord
from gepa_opt.stopping import LMUsage, RunProgress


class Progress:
    def __init__(self, config: GEPAConfig, usage: Callable[[], LMUsage]) -> None:
        self._config = config
        self._usage = usage
        self.started = time.monotonic()
        self.best_score = float("-inf")
        self.since_improvement = 0

    def now(self, budget: Budget, state: GEPAState) -> RunProgress:
        spent = self._usage()
        return RunProgress(
            elapsed_s=time.monotonic() - self.started,
            metric_calls_used=budget.metric_calls_used,
            reflection_calls_used=budget.reflection_calls,
            prompt_tokens=spent.prompt_tokens,
            completion_tokens=spent.completion_tokens,
            cost_usd=spent.cost_usd,
            best_score=self.best_score if state.candidates else None,
            proposals_since_improvement=self.since_improvement,
        )

    def record(self, state: GEPAState, record: ProposalRecord | MergeTried) -> StopReason | None:
        """Count a finished proposal or merge (a proposal also goes into the history);
        STALLED once `max_idle_iterations` proposals in a row cost no metric call."""
        best = aggregate(state.val_scores[best_index(state.val_scores)])
        self.since_improvement = 0 if best > self.best_score else self.since_improvement + 1
        self.best_score = max(best, self.best_score)
        if isinstance(record, MergeTried):
            return None
        state.history.append(record)
        state.idle_iterations = 0 if record.metric_calls else state.idle_iterations + 1
        if state.idle_iterations >= self._config.max_idle_iterations:
            return StopReason.STALLED
        return None

    def too_many_failed(self, budget: Budget) -> StopReason | None:
        limit = self._config.max_failed_calls
        if limit is not None and budget.failed_calls >= limit:
            return StopReason.FAILED_CALLS
        return None

    @staticmethod
    def out_of_budget(budget: Budget, reflections_per_child: int) -> StopReason:
        """Why no group fits any more: the reflection limit, when a proposal's
        reflections no longer fit it, else the metric-call budget."""
        left = budget.reflections_left()
        if left is not None and left < reflections_per_child:
            return StopReason.REFLECTION_BUDGET
        return StopReason.BUDGET
