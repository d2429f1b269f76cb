"""A rich progress bar per stage, counting what the stage does in its own unit (metric
calls, optimizer steps, items judged) with an ETA, fed by gepa_opt's events, the
trainer's steps or a plain `advance`. The same milestones (started, a quarter, half and
three quarters done, a new best, done) go to the log, which reaches the flow run's logs
in the Prefect UI (PREFECT_LOGGING_EXTRA_LOGGERS), and, inside a flow run, to a Prefect
progress artifact per stage.

Training reports from its own thread: a call from another thread is handed to the
thread that entered the stage (its event loop), so the counts, the log and Prefect's
client are only ever touched there.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import time
from dataclasses import replace
from typing import Any
from uuid import UUID

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    SpinnerColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
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

MILESTONES = (0.25, 0.5, 0.75)  # shares of a phase's total said in the log
ARTIFACT_STEP = 0.05  # the Prefect artifact moves by 5% of the total at least ...
ARTIFACT_SECONDS = 10.0  # ... or after 10 s, whichever comes first


class StageProgress:
    """`with StageProgress("judge on the night's traces", 120, "traces judged") as p:`,
    then `p.advance()` per item, `p.update(step, total=..., loss="0.41")`, or
    `on_event=p.on_event` (GEPA: the unit is metric calls) and `p.on_train_step`
    (training: optimizer steps). `phase(unit, total)` starts counting something else
    (a LoRA round samples rollouts, trains, then compares). Without a total the bar is a
    spinner with the count so far; fields given to `update` show after the count.
    """

    def __init__(self, description: str, total: int | None = None, unit: str = ""):
        self.description = description
        self.unit = unit
        self.total = total or None
        self.completed = 0
        self.calls_used = 0
        # (metric calls used, best validation score) each time the frontier moved: the
        # optimization curve, logged to MLflow as a metric history
        self.curve: list[tuple[int, float]] = []
        # pool index -> metric calls used when the candidate joined the pool
        self.found: dict[int, int] = {}
        self._said: set[float] = set()  # the milestones of this phase already logged
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.get_ident()
        self._artifact: UUID | None = None
        self._artifact_at = (0.0, 0.0)  # (share, time) of its last update
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[count]}"),
            TextColumn("{task.fields[info]}"),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            console=console,
            transient=False,
        )
        self._task = self._progress.add_task(
            description, total=self.total, unit=unit, count=self._count(), info=""
        )

    @property
    def task(self) -> Task:
        """The bar as rich holds it: its description, total, completed and fields."""
        return self._progress.tasks[0]

    def __enter__(self) -> StageProgress:
        self._started = time.monotonic()
        self._thread = threading.get_ident()
        try:
            self._loop = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None
        log.info("%s: started%s", self.description, f" ({self._count()})" if self.unit else "")
        self._open_artifact()
        self._progress.start()
        return self

    def __exit__(self, error_type, *exc) -> None:
        self._progress.stop()
        seconds = time.monotonic() - self._started
        how = "done" if error_type is None else f"failed ({error_type.__name__})"
        best = f", best {self.curve[-1][1]:.3f}" if self.curve else ""
        count = f", {self._count()}" if self.unit else ""
        log.info("%s: %s in %.0f s%s%s", self.description, how, seconds, count, best)
        if error_type is None:
            self._move_artifact(1.0, force=True)

    # what the stage tells it

    def advance(self, n: int = 1, **fields: Any) -> None:
        """`n` more of the unit done."""
        if self._elsewhere(self.advance, n, **fields):
            return
        self.update(self.completed + n, **fields)

    def update(self, completed: int | None = None, total: int | None = None, **fields: Any) -> None:
        """The count so far (None: unchanged), the total where it was not known at the
        start, and text fields shown beside the count (e.g. loss="0.412")."""
        if self._elsewhere(self.update, completed, total, **fields):
            return
        if total is not None and total != self.total:
            self.total = total or None
        if completed is not None:
            self.completed = completed
        info = " ".join(f"{key} {value}" for key, value in fields.items())
        self._progress.update(
            self._task,
            completed=self.completed,
            total=self.total,
            count=self._count(),
            **({"info": info} if fields else {}),
        )
        self._milestones()

    def expect(self, n: int) -> None:
        """`n` more of the unit to do than the total said: work found as it goes."""
        if self._elsewhere(self.expect, n):
            return
        self.update(total=(self.total or 0) + n)

    def phase(self, unit: str, total: int | None = None) -> None:
        """Count something else from here on: a new unit, from zero to `total`."""
        if self._elsewhere(self.phase, unit, total):
            return
        self.unit, self.total, self.completed, self._said = unit, total or None, 0, set()
        self._progress.reset(self._task, unit=unit, count=self._count(), info="")
        self.task.total = self.total  # reset keeps a total it is given as None
        log.info("%s: %s", self.description, self._count())

    def dated(self, pool: tuple[PoolEntry, ...]) -> tuple[PoolEntry, ...]:
        """A run's `pool` with when each candidate joined it, as this run's events said
        (a resumed run's candidates from before the kill stay undated)."""
        return tuple(
            replace(entry, found_at=self.found.get(k, entry.found_at))
            for k, entry in enumerate(pool)
        )

    def on_event(self, event: GEPAEvent) -> None:
        """GEPA's events: metric calls spent, the best score each time it moves, and
        when each candidate joined the pool."""
        if isinstance(event, ProposalAccepted | MergeTried) and event.candidate_idx is not None:
            self.found[event.candidate_idx] = self.calls_used  # its valset pass is paid
        elif isinstance(event, BudgetUsed):
            self.calls_used = event.metric_calls_used
            self.update(event.metric_calls_used)
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
            self.update(best=f"{event.best_score:.3f}", candidates=event.num_candidates)

    def on_train_step(self, step: int, total: int, logs: dict[str, float]) -> None:
        """The trainer's optimizer step (`weights.lora.ProgressCallback`), from its thread:
        the count in steps, the step's loss and learning rate beside it."""
        if self._elsewhere(self.on_train_step, step, total, logs):
            return
        if self.unit != "steps":
            self.phase("steps", total)
        fields = {}
        if "loss" in logs:
            fields["loss"] = f"{logs['loss']:.4f}"
        if "learning_rate" in logs:
            fields["lr"] = f"{logs['learning_rate']:.2e}"
        self.update(step, total, **fields)

    # where it goes

    def _elsewhere(self, method, *args: Any, **kwargs: Any) -> bool:
        """Hand a call from another thread to the stage's loop; True when it was."""
        if threading.get_ident() == self._thread or self._loop is None:
            return False
        try:
            self._loop.call_soon_threadsafe(lambda: method(*args, **kwargs))
        except RuntimeError:  # the loop closed: the stage is over
            pass
        return True

    def _count(self) -> str:
        """e.g. "3/12 steps", "40 records"; "" for a stage that counts nothing."""
        if not self.unit:
            return ""
        if self.total:
            return f"{self.completed}/{self.total} {self.unit}"
        return f"{self.completed} {self.unit}"

    def _share(self) -> float | None:
        return min(self.completed / self.total, 1.0) if self.total else None

    def _milestones(self) -> None:
        share = self._share()
        if share is None:
            return
        for mark in MILESTONES:
            if share >= mark and mark not in self._said:
                self._said.add(mark)
                log.info("%s: %d%% (%s)", self.description, round(mark * 100), self._count())
        self._move_artifact(share)

    def _open_artifact(self) -> None:
        """A Prefect progress artifact for the stage, inside a flow run only. Prefect is
        imported here: the stages stay importable without it (`flows.night.stages`)."""
        from prefect.artifacts import create_progress_artifact
        from prefect.context import get_run_context
        from prefect.exceptions import MissingContextError

        try:
            get_run_context()
        except MissingContextError:
            return
        try:
            self._artifact = create_progress_artifact(
                0.0, key=artifact_key(self.description), description=self._describe(), _sync=True
            )
        except Exception as err:  # a progress display never costs a stage
            log.debug("no progress artifact for %s: %s", self.description, err)
        self._artifact_at = (0.0, time.monotonic())

    def _move_artifact(self, share: float, force: bool = False) -> None:
        """Update the artifact, at most every `ARTIFACT_STEP` of the total or
        `ARTIFACT_SECONDS`, whichever comes first (each update is a request)."""
        if self._artifact is None:
            return
        last_share, last_time = self._artifact_at
        now = time.monotonic()
        if not force and share - last_share < ARTIFACT_STEP and now - last_time < ARTIFACT_SECONDS:
            return
        self._artifact_at = (share, now)
        from prefect.artifacts import update_progress_artifact

        try:
            update_progress_artifact(
                self._artifact, share * 100, description=self._describe(), _sync=True
            )
        except Exception as err:
            log.debug("progress artifact of %s not updated: %s", self.description, err)
            self._artifact = None

    def _describe(self) -> str:
        return f"{self.description}: {self._count()}"


def artifact_key(description: str) -> str:
    """A Prefect artifact key (lowercase letters, digits and dashes) for a stage."""
    return "progress-" + re.sub(r"[^a-z0-9]+", "-", description.lower()).strip("-")
