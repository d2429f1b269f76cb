"""The state folder is the user's alone: it holds trace text (the label store, the runs'
folders), MLflow's and Prefect's databases, and adapters trained on that text.

`prepare_environment` makes the folder 0700, so nobody else reaches in while a command
runs; as a command comes in and as it leaves, every file in the folder loses its group
and other bits (0600, folders 0700), what the command made and what an earlier one (or
an earlier version) left readable alike.

Not a process-wide umask: a command also writes outside the folder, where others must
read (the serving server's adapter folder, a volume vLLM mounts as its own user).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def private_state(state_dir: Path) -> Iterator[None]:
    """Restrict what `state_dir` holds before the block and after it, however it ends."""
    restrict(state_dir)
    try:
        yield
    finally:
        restrict(state_dir)


def restrict(state_dir: Path) -> None:
    """Take the group's and others' bits off every file and folder under `state_dir`."""
    for folder, subfolders, files in os.walk(state_dir):
        for name in [*subfolders, *files]:
            _owner_only(Path(folder) / name)


def _owner_only(path: Path) -> None:
    try:
        mode = path.lstat().st_mode
        if stat.S_ISLNK(mode) or not mode & 0o077:  # a link's target is not ours to change
            return
        path.chmod(stat.S_IMODE(mode) & 0o700)
    except (FileNotFoundError, PermissionError):  # gone meanwhile, or another user's
        pass
