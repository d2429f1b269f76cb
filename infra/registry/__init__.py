"""The registry seam: MLflow holds prompt versions, adapters, metrics and aliases.

MLflow reads MLFLOW_DISABLE_TELEMETRY once, when it is imported (it starts its telemetry
client then), so it is set here, before any module of this package imports MLflow. It is a
default for the library, not the registry's setting (a value the user set wins), and it
stays here rather than only in `flows.environment.prepare_environment`, which sets the same
default for the command line: tests, benchmarks and notebooks import the registry without
it, and infra imports nothing of flows. A `Registry` itself sets nothing process-wide.
Nothing else is imported: MLflow is slow to import, and only
`infra.registry.mlflow_registry` needs it.
"""

import os

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
