"""One command at a time per state folder: two nights, or a night and a promotion, in
one folder would race on its sqlite stores (MLflow's, Prefect's, the label store) and
on the same aliases.

The lock is an OS file lock (`filelock`), which the kernel drops when its process dies,
so a crashed or killed command never blocks the next one. Deployments also get one
night at a time from Prefect (`concurrency_limit` in prefect.yaml).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from infra.errors import UserFacingError

LOCK_FILE = "night.lock"
HOLDER_FILE = "night.lock.json"  # who holds it, for the message the next command prints


class NightRunning(UserFacingError):
    pass


@contextmanager
def one_night(state_dir: Path, holder: str, wait_s: float | None) -> Iterator[None]:
    """Hold the folder's lock for the block as `holder` (what the command is, in words:
    "night 20261201T020000Z"); wait up to `wait_s` seconds for it (None: as long as it
    takes), else raise NightRunning naming the command that holds it."""
    state_dir.mkdir(parents=True, exist_ok=True)
    lock = FileLock(state_dir / LOCK_FILE)
    try:
        lock.acquire(timeout=-1 if wait_s is None else wait_s)
    except Timeout:
        raise NightRunning(
            f"{state_dir.resolve()} is in use by {_holder(state_dir)}: wait for it to end, "
            "or set state.wait_for_night_s to queue behind it."
        ) from None
    said = state_dir / HOLDER_FILE
    said.write_text(json.dumps({"holder": holder, "pid": os.getpid(), "since": time.time()}))
    try:
        yield
    finally:
        said.unlink(missing_ok=True)
        lock.release()


def _holder(state_dir: Path) -> str:
    try:
        info = json.loads((state_dir / HOLDER_FILE).read_text())
        started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(info["since"]))
        return f"{info['holder']} (process {info['pid']}, since {started})"
    except (OSError, ValueError, KeyError, TypeError):
        return "another flywheel command (it has not said which)"
