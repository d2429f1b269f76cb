"""Each held-out evaluation of the night as an MLflow evaluation run, where teams compare.

The night scores production and its candidate on the same held-out examples (true labels
where known, else the night's judge). Each of those evaluations becomes a child run of the
night's MLflow run, named `heldout-<label>`, made by `mlflow.genai.evaluate`: one row per
example, its request and reply, and the flywheel's score for it as the scorer
`flywheel_score` (not judged again: the numbers are the gate's). MLflow's evaluation view
then lists the night's versions side by side, and the report links each run.
"""

from __future__ import annotations

from flows.night.stages import Evaluation
from infra.registry.mlflow_registry import Registry

SCORER = "flywheel_score"  # the true-label score where known, else the night's judge's


def log_evaluation_runs(
    registry: Registry, evals: dict[str, Evaluation], tags: dict[str, str]
) -> dict[str, str]:
    """Label -> the id of its evaluation run, logged under the active run once per night
    (`tags` name the night: a resumed registration finds them)."""
    runs = {}
    for label, evaluation in evals.items():
        rows = [
            {"inputs": {"id": i, "request": evaluation.requests[i]}, "outputs": reply}
            for i, reply in sorted(evaluation.outputs.items())
            if i in evaluation.scores and i in evaluation.requests
        ]
        if not rows:
            continue
        name = f"heldout-{label}"
        found = registry.find_run(name, tags)
        runs[label] = found or registry.log_evaluation(name, tags, rows, evaluation.scores, SCORER)
    return runs
