"""A night's run id: its name in the state folder, MLflow and Prefect. Its own module,
free of heavy imports, so that a command can name its night before the libraries load."""

from __future__ import annotations

import re

from infra.errors import UserFacingError

RUN_ID_FORMAT = "%Y%m%dT%H%M%SZ"  # a new night's id: when it started, UTC
RUN_ID_RULE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def check_run_id(run_id: str) -> str:
    """A run id names folders and cache keys: letters, digits, '.', '_', '-' only."""
    if not RUN_ID_RULE.fullmatch(run_id) or ".." in run_id:
        raise UserFacingError(
            f"{run_id!r} is not a night's run id: use the id `flywheel status` shows "
            "(letters, digits, '.', '_' and '-', at most 64)."
        )
    return run_id
