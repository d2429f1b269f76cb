"""The registry seam: MLflow holds prompt versions, adapters, metrics and aliases.

MLflow reads MLFLOW_DISABLE_TELEMETRY once, when it is imported, so it is set here,
before any module of this package imports MLflow. Nothing else is imported: MLflow is
slow to import, and only `infra.registry.mlflow_registry` needs it.
"""

import os

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
