"""Test-wide environment: everything local, quiet, and inside temporary folders."""

import os
import tempfile

# Read by Prefect, MLflow and transformers at import time, so set before any test imports them.
_home = tempfile.mkdtemp(prefix="flywheel-tests-")
os.environ.setdefault("PREFECT_HOME", os.path.join(_home, "prefect"))
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
