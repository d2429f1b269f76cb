"""Test-wide environment: everything local, quiet, and inside a temporary folder."""

import tempfile
from pathlib import Path

from flows.environment import prepare_environment

# Read by Prefect, MLflow and transformers at import time, so set before tests import them.
prepare_environment(Path(tempfile.mkdtemp(prefix="flywheel-tests-")))
