"""Settings the outside libraries read once, at import: keep everything local and quiet.

Call before importing Prefect, MLflow or transformers; values already set win.
"""

from __future__ import annotations

import os
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
        # persisted task results here, next to the MLflow store.
        "PREFECT_HOME": str((state_dir / "prefect").resolve()),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",  # 2 slow cores
        "PREFECT_LOGGING_LEVEL": "WARNING",
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
