"""Raw trace text kept by a night expires: persisted stage results and GEPA run folders
hold masked trace text, prompts and replies, and are only needed to resume a night.
What a night is for stays (MLflow's versions and metrics, the label store, the outbox)."""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path

log = logging.getLogger(__name__)

DAY_S = 86_400


def expire(state_dir: Path, results_dir: Path, days: int, now: float | None = None) -> int:
    """Delete the GEPA run folders under `state_dir` and the Prefect results in
    `results_dir` not written for `days` days; how many went. Results outside the state
    folder are left alone: a team's Prefect storage holds other flows' too."""
    cutoff = (time.time() if now is None else now) - days * DAY_S
    state_dir, results_dir = state_dir.resolve(), results_dir.resolve()
    runs_dir = state_dir / "runs"
    gone = 0
    if results_dir.is_relative_to(state_dir) and results_dir.is_dir():
        for path in results_dir.rglob("*"):
            if path.is_file() and path.stat().st_mtime < cutoff:
                path.unlink(missing_ok=True)
                gone += 1
    if runs_dir.is_dir():
        for run in runs_dir.iterdir():
            if run.is_dir() and _newest_mtime(run) < cutoff:
                shutil.rmtree(run, ignore_errors=True)
                gone += 1
    if gone:
        log.info(
            "retention: removed %d stage results and run folders older than %d days", gone, days
        )
    return gone


def _newest_mtime(folder: Path) -> float:
    """A run folder is as young as its newest file (a resumed night writes there)."""
    times = [p.stat().st_mtime for p in folder.rglob("*") if p.is_file()]
    return max(times) if times else folder.stat().st_mtime
