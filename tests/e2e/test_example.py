"""The template for bringing your own agent (docs/production.md): `flywheel run` on the two-step
example (examples/request_reply), its Langfuse prompts replayed from its traces with no
code, on the real model, a real MLflow and Prefect's own server."""

from __future__ import annotations

import json

import mlflow
import pytest
from mlflow import MlflowClient

from flows.production.promotion import PROMPTS_TAG
from infra.traces.managed_prompts import read_prompt_file
from tests.e2e.example_night import ROOT, run_example_night

pytestmark = pytest.mark.slow

EXAMPLE = ROOT / "examples" / "request_reply"


def test_flywheel_run_optimizes_the_example_agent_s_langfuse_prompts(tmp_path):
    state = tmp_path / "state"
    night = run_example_night(
        EXAMPLE,
        state,
        JUDGE__MAX_METRIC_CALLS="30",
        AGENT_OPT__MAX_METRIC_CALLS="40",
        AGENT_OPT__PARETO_SIZE="6",
    )
    # 0: its candidate passed the gate; 4: the gate refused it (a 40-call budget may not
    # beat the recorded prompts); either way the night ran to its end
    assert night.returncode in (0, 4), night.stdout[-3000:] + night.stderr[-3000:]

    mlflow.set_tracking_uri(f"sqlite:///{state.resolve()}/mlflow.db")
    client = MlflowClient()
    version = client.get_model_version("agent", "1")
    # the components are the two Langfuse prompts the traces were made from
    assert set(json.loads(version.tags[PROMPTS_TAG])) == {
        "agent-classify-request",
        "agent-write-reply",
    }
    metrics = client.get_run(version.run_id).data.metrics
    # every trace replayed (a quarter held out, judged), none left out
    assert metrics["traces_traces"] >= 90
    assert metrics["traces_skipped_records"] == metrics["traces_not_replayable"] == 0
    # each metric call replays both steps: two model calls, then the judge's
    assert metrics["agent_metric_calls"] <= 40
    assert metrics["model_calls_step1_prompts"] >= 2 * metrics["agent_metric_calls"]
    # the night started from the production versions in the export's prompts.jsonl
    seeds = read_prompt_file(EXAMPLE / "traces" / "prompts.jsonl")
    seed_val = metrics["step1_agent_val_seed"]
    assert 0.0 <= seed_val <= 1.0 and metrics["step1_agent_val_best"] >= seed_val
    for name, prompt in seeds.items():
        assert prompt.version == 1 and f"agent-{name}" in json.loads(version.tags[PROMPTS_TAG])
