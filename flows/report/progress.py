"""A rich progress line per stage, driven by gepa_opt's events where there are some; the
same milestones as log lines (stage started, a new best, stage done), which reach the
flow run's logs in the Prefect UI (PREFECT_LOGGING_EXTRA_LOGGERS)."""

from __future__ import annotations

import logging
import time
from dataclasses import replace

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from gepa_opt import (
    BudgetUsed,
    FrontierChanged,
    GEPAEvent,
    MergeTried,
    PoolEntry,
    ProposalAccepted,
)

console = Console(stderr=True)
log = logging.getLogger(__name__)


class StageProgress:
    """`with StageProgress("judge alignment", budget) as p: ... on_event=p.on_event`.

    With a budget the bar counts metric calls; without, it shows a spinner and the time.
    """

    def __init__(self, description: str, total_metric_calls: int | None):
        self.description = description
        self.calls_used = 0
        # (metric calls used, best validation score) each time the frontier moved: the
        # optimization curve, logged to MLflow as a metric history
        self.curve: list[tuple[int, float]] = []
        # pool index -> metric calls used when the candidate joined the pool
        self.found: dict[int, int] = {}
        columns = [SpinnerColumn(), TextColumn("[bold]{task.description}"), TimeElapsedColumn()]
        if total_metric_calls:
            columns[2:2] = [
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("metric calls {task.fields[best]}"),
            ]
        self._progress = Progress(*columns, console=console, transient=False)
        self._task = self._progress.add_task(description, total=total_metric_calls, best="")

    def __enter__(self) -> StageProgress:
        self._started = time.monotonic()
        log.info("%s: started", self.description)
        self._progress.start()
        return self

    def __exit__(self, error_type, *exc) -> None:
        self._progress.stop()
        seconds = time.monotonic() - self._started
        how = "done" if error_type is None else f"failed ({error_type.__name__})"
        best = f", best {self.curve[-1][1]:.3f}" if self.curve else ""
        calls = f", {self.calls_used} metric calls" if self.calls_used else ""
        log.info("%s: %s in %.0f s%s%s", self.description, how, seconds, calls, best)

    def dated(self, pool: tuple[PoolEntry, ...]) -> tuple[PoolEntry, ...]:
        """A run's `pool` with when each candidate joined it, as this run's events said
        (a resumed run's candidates from before the kill stay undated)."""
        return tuple(
            replace(entry, found_at=self.found.get(k, entry.found_at))
            for k, entry in enumerate(pool)
        )

    def on_event(self, event: GEPAEvent) -> None:
        if isinstance(event, ProposalAccepted | MergeTried) and event.candidate_idx is not None:
            self.found[event.candidate_idx] = self.calls_used  # its valset pass is paid
        elif isinstance(event, BudgetUsed):
            self.calls_used = event.metric_calls_used
            self._progress.update(self._task, completed=event.metric_calls_used)
        elif isinstance(event, FrontierChanged):
            if event.num_candidates == 1:  # the seed, alone in the pool
                self.found.setdefault(event.best_idx, self.calls_used)
            if self.curve and event.best_score > self.curve[-1][1]:
                log.info(
                    "%s: best %.3f after %d metric calls",
                    self.description,
                    event.best_score,
                    self.calls_used,
                )
            self.curve.append((self.calls_used, event.best_score))
            self._progress.update(
                self._task,
                best=f"· best {event.best_score:.3f} · {event.num_candidates} candidates",
            )
