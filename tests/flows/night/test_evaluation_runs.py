"""The night's held-out evaluations as MLflow evaluation runs: one per version, its rows
and the gate's own scores, logged once per night."""

from __future__ import annotations

import json
import pickle
from statistics import fmean

import mlflow
from mlflow import MlflowClient

from flows.night.evaluation_runs import SCORER, log_evaluation_runs
from flows.night.stages import Evaluation
from infra.registry.mlflow_registry import Registry
from infra.settings import Settings


def evaluation(scores: dict[str, float]) -> Evaluation:
    return Evaluation(
        n=len(scores),
        accuracy=None,
        judge_pass_rate=None,
        scores=scores,
        outputs={i: f"reply to {i}" for i in scores},
        requests={i: f"request {i}" for i in scores},
    )


def test_each_evaluation_is_an_mlflow_evaluation_run_with_the_gates_scores(tmp_path):
    settings = Settings(state_dir=tmp_path)
    registry = Registry(settings.mlflow)
    evals = {
        "seed": evaluation({"a": 0.2, "b": 0.4, "c": 0.0}),
        "candidate": evaluation({"a": 0.9, "b": 0.5, "c": 1.0}),
    }
    tags = {"flywheel.run_id": "n1"}
    with registry.start_run("night-n1", tags) as night:
        runs = log_evaluation_runs(registry, evals, tags)
        again = log_evaluation_runs(registry, evals, tags)  # a resumed registration
    assert set(runs) == {"seed", "candidate"} and again == runs
    client = MlflowClient(settings.tracking_uri)
    for label, run_id in runs.items():
        run = client.get_run(run_id)
        assert run.info.run_name == f"heldout-{label}"
        assert run.data.tags["mlflow.parentRunId"] == night.info.run_id
        mean = run.data.metrics[f"{SCORER}/mean"]
        assert abs(mean - fmean(evals[label].scores.values())) < 1e-9
    mlflow.set_tracking_uri(settings.tracking_uri)
    traces = mlflow.search_traces(
        locations=[registry.experiment_id], run_id=runs["candidate"], return_type="list"
    )
    assert len(traces) == 3  # one per held-out example, with its request and reply


def test_an_evaluation_pickled_before_replies_were_kept_gets_no_run(tmp_path):
    old = evaluation({"a": 0.5})
    del old.__dict__["outputs"]  # pickled before replies were kept
    old = pickle.loads(pickle.dumps(old))  # as a night resumed across the change reads it
    registry = Registry(Settings(state_dir=tmp_path).mlflow)
    with registry.start_run("night-n2", {"flywheel.run_id": "n2"}):
        assert log_evaluation_runs(registry, {"seed": old}, {"flywheel.run_id": "n2"}) == {}


def test_every_row_of_a_full_held_out_set_keeps_its_trace_and_score(tmp_path):
    """MLflow's default ten evaluation workers exhausted sqlite's connection pool: of 60
    rows, 27 lost their trace (and 90 s went to timeouts)."""
    scores = {f"t{i:02d}": float(i % 2) for i in range(60)}
    settings = Settings(state_dir=tmp_path)
    registry = Registry(settings.mlflow)
    tags = {"flywheel.run_id": "n3"}
    with registry.start_run("night-n3", tags):
        runs = log_evaluation_runs(registry, {"candidate": evaluation(scores)}, tags)
    mlflow.set_tracking_uri(settings.tracking_uri)
    traces = mlflow.search_traces(
        locations=[registry.experiment_id], run_id=runs["candidate"], return_type="list"
    )
    logged = {
        json.loads(trace.data.request)["id"]: [
            a.value for a in trace.search_assessments(name=SCORER)
        ]
        for trace in traces
    }
    assert logged == {i: [score] for i, score in scores.items()}
