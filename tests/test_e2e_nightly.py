"""The whole night on real parts: the local model, sqlite MLflow, Prefect (test harness)."""

import asyncio
import json
from pathlib import Path

import mlflow
import pytest
from mlflow import MlflowClient
from prefect.testing.utilities import prefect_test_harness

from flows.nightly import nightly
from flows.runtime import runtime
from infra.settings import Settings
from infra.traces.jsonl import DEMO_DIR

pytestmark = pytest.mark.slow


def small_export(folder: Path, traces: int = 48, heldout: int = 21) -> Path:
    """The demo export cut down, plus one malformed line of each kind."""
    folder.mkdir()
    observations = (DEMO_DIR / "observations.jsonl").read_text().splitlines()[:traces]
    kept = {json.loads(line)["traceId"] for line in observations}
    scores = [
        s
        for s in (DEMO_DIR / "scores.jsonl").read_text().splitlines()
        if json.loads(s)["traceId"] in kept
    ]
    (folder / "observations.jsonl").write_text("\n".join(observations + ['{"id": "broken"']) + "\n")
    bad_score = json.dumps(
        {
            "id": "s-bad",
            "traceId": next(iter(kept)),
            "name": "correct",
            "value": 1,
            "dataType": "BOOLEAN",
            "source": "ANNOTATION",
        }
    )  # no timestamp
    (folder / "scores.jsonl").write_text("\n".join(scores + [bad_score]) + "\n")
    rows = (DEMO_DIR / "heldout.jsonl").read_text().splitlines()[:heldout]
    (folder / "heldout.jsonl").write_text("\n".join(rows) + "\n")
    return folder


def test_nightly_registers_versions_with_metrics(tmp_path):
    settings = Settings(
        state_dir=tmp_path / "state",
        traces={"jsonl_dir": str(small_export(tmp_path / "export"))},
        judge={"max_metric_calls": 40, "reflection_minibatch_size": 3},
        agent_opt={
            "max_metric_calls": 30,
            "pareto_size": 6,
            "reflection_minibatch_size": 3,
            "reflection_max_tokens": 48,
        },
        lora={
            "max_train_examples": 8,
            "samples_per_example": 1,
            "batch_size": 4,
            "max_seq_length": 256,
        },
    )
    runtime(settings)
    with prefect_test_harness():
        report = asyncio.run(nightly(run_id="e2e"))
        # A second run of the same night reuses every finished stage: nothing is redone.
        again = asyncio.run(nightly(run_id="e2e"))

    assert report.collected["skipped_records"] >= 2  # the two malformed lines
    assert report.prompt.metric_calls <= 30 and report.judge.metric_calls <= 40
    assert set(report.evals) >= {"seed", "prompts"}
    registered = report.registered
    assert registered is not None and registered.model_version == 1
    assert again.registered.model_version == 1 and again.prompt.prompts == report.prompt.prompts

    mlflow.set_tracking_uri(settings.tracking_uri)
    client = MlflowClient()
    version = client.get_model_version_by_alias("agent", "candidate")
    assert int(version.version) == 1
    assert version.tags["flywheel.judge_trusted"] == str(report.judge.trusted).lower()
    prompt = mlflow.genai.load_prompt("prompts:/agent-instructions@candidate")
    assert prompt.template == report.prompt.prompts["instructions"]
    metrics = client.get_run(registered.mlflow_run_id).data.metrics
    for key in (
        "judge_seed_kappa",
        "judge_aligned_kappa",
        "heldout_seed_accuracy",
        "heldout_prompts_accuracy",
        "agent_metric_calls",
        "wall_seconds",
    ):
        assert key in metrics, key
    assert metrics["agent_metric_calls"] == report.prompt.metric_calls
    curve = client.get_metric_history(registered.mlflow_run_id, "agent_best_val_score")
    assert curve and curve[0].step <= curve[-1].step <= 30
    assert metrics["heldout_seed_accuracy"] == pytest.approx(report.evals["seed"].accuracy)
