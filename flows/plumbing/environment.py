"""Settings the outside libraries read once, at import: keep everything local and quiet.

Call before importing Prefect, MLflow or transformers; values already set win.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path


def prepare_environment(state_dir: Path) -> None:
    # The state folder holds trace text, MLflow's store and adapters: the user's alone.
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        state_dir.chmod(0o700)
    except PermissionError:  # a folder another user made for us: theirs to restrict
        pass
    defaults = {
        # Prefect's ephemeral server keeps its database (the runs the UI shows) and the
        # persisted task results here, next to the MLflow store; a team's own Prefect
        # server (PREFECT_API_URL, or the active profile's) keeps Prefect where it is.
        **(
            {}
            if team_prefect_server()
            else {"PREFECT_HOME": str((state_dir / "prefect").resolve())}
        ),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",  # 2 slow cores
        "PREFECT_LOGGING_LEVEL": "WARNING",
        # flywheel's own loggers reach the flow run's logs in the Prefect UI
        "PREFECT_LOGGING_EXTRA_LOGGERS": "flows,judges,infra,gepa_opt,weights",
        "PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW": "ignore",  # start-up, outside a run
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "DO_NOT_TRACK": "1",
        "HF_HUB_OFFLINE": "1",  # the model ships in a package: never reach for a hub
        "TRANSFORMERS_OFFLINE": "1",
        # one progress display (flywheel's own), not a bar per library
        "TRANSFORMERS_VERBOSITY": "error",
        "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
    }
    for key, value in defaults.items():
        os.environ.setdefault(key, value)


def team_prefect_server() -> str | None:
    """The Prefect server the user points at, if any: PREFECT_API_URL in the environment,
    or in their active Prefect profile (where `prefect profile use` / `prefect config set`
    put it). None: flywheel runs its own ephemeral server."""
    if url := os.environ.get("PREFECT_API_URL"):
        return url
    home = Path(os.environ.get("PREFECT_HOME", "~/.prefect")).expanduser()
    profiles = Path(os.environ.get("PREFECT_PROFILES_PATH", home / "profiles.toml"))
    try:
        data = tomllib.loads(profiles.read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return None
    active = os.environ.get("PREFECT_PROFILE") or data.get("active")
    profile = data.get("profiles", {}).get(active, {})
    return profile.get("PREFECT_API_URL") if isinstance(profile, dict) else None
