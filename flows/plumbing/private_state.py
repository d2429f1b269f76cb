"""The state folder is the user's alone: it holds trace text (the label store, the runs'
folders), MLflow's and Prefect's databases, and adapters trained on that text.

`prepare_environment` makes the folder 0700; inside this block every file a command
makes is created 0600 (folders 0700), and what an earlier command left readable by
others (a folder from before this rule, a copy) loses its group and other bits.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PRIVATE_UMASK = 0o077  # no bit for the group or others on anything created


@contextmanager
def private_state(state_dir: Path) -> Iterator[None]:
    """Restrict what `state_dir` holds now, and everything this process (and the servers
    it starts, which inherit the mask) creates until the block ends."""
    restrict(state_dir)
    before = os.umask(PRIVATE_UMASK)
    try:
        yield
    finally:
        os.umask(before)


def restrict(state_dir: Path) -> None:
    """Take the group's and others' bits off every file and folder under `state_dir`."""
    for folder, subfolders, files in os.walk(state_dir):
        for name in [*subfolders, *files]:
            _owner_only(Path(folder) / name)


def _owner_only(path: Path) -> None:
    try:
        mode = path.lstat().st_mode
        if path.is_symlink() or not mode & 0o077:  # a link's target is not ours to change
            return
        path.chmod(stat.S_IMODE(mode) & 0o700)
    except (FileNotFoundError, PermissionError):  # gone meanwhile, or another user's
        pass
