"""`flywheel run` on the tool-calling example (examples/tool_agent): its Langfuse prompt
replayed from its traces, tool loop and all, with no code, on the real model, a real
MLflow and Prefect's own server; each call the candidate makes answered by a recorded
result or the example's offline stand-ins, never by a live tool."""

from __future__ import annotations

import json
import re

import mlflow
import pytest
from mlflow import MlflowClient

from flows.night.collect import in_heldout_slice
from flows.production.promotion import PROMPTS_TAG
from tests.e2e.example_night import ROOT, run_example_night

pytestmark = pytest.mark.slow

EXAMPLE = ROOT / "examples" / "tool_agent"
HELDOUT_SHARE = 0.15  # the example holds out a quarter; a test, fewer replays to judge


def trace_ids() -> set[str]:
    lines = (EXAMPLE / "traces" / "observations.jsonl").read_text(encoding="utf-8").splitlines()
    return {json.loads(line)["traceId"] for line in lines}


def test_flywheel_run_optimizes_the_tool_agent_s_prompt_through_its_tool_loops(tmp_path):
    state = tmp_path / "state"
    night = run_example_night(
        EXAMPLE,
        state,
        JUDGE__MAX_METRIC_CALLS="16",
        AGENT_OPT__MAX_METRIC_CALLS="16",
        AGENT_OPT__PARETO_SIZE="4",
        EVAL__HELDOUT_TRACE_SHARE=str(HELDOUT_SHARE),
        CORRECTIONS__ENABLED="false",  # they train weight steps: none tonight
        PROMOTION__PAIRWISE="true",  # no true labels: replies compared side by side too
    )
    # 0: its candidate passed the gate; 4: the gate refused it; either way the night ended
    assert night.returncode in (0, 4), night.stdout[-3000:] + night.stderr[-3000:]
    # the held-out replay ran the candidate's tool loops and says how each call was answered
    (line,) = [
        line for line in night.stdout.splitlines()
        if line.startswith("Tool calls in the candidate's held-out replay: ")
    ]  # fmt: skip
    answered = {
        how: int(n) for n, how in re.findall(r"(\d+) (reused|looked up|simulated|stopped)", line)
    }
    assert set(answered) == {"reused", "looked up", "simulated", "stopped"}
    assert answered["reused"] + answered["looked up"] + answered["simulated"] > 0

    mlflow.set_tracking_uri(f"sqlite:///{state.resolve()}/mlflow.db")
    client = MlflowClient()
    version = client.get_model_version("agent", "1")
    # the prompt and each tool's description, registered together
    assert set(json.loads(version.tags[PROMPTS_TAG])) == {
        "agent-book-meeting",
        "agent-book-meeting.tools.find_slot",
        "agent-book-meeting.tools.book",
    }
    metrics = client.get_run(version.run_id).data.metrics
    # every trace outside the held-out slice collected for the night, none left out
    trained = [t for t in trace_ids() if not in_heldout_slice(t, HELDOUT_SHARE)]
    assert len(trace_ids()) == 80 and metrics["traces_traces"] == len(trained)
    assert metrics["traces_skipped_records"] == metrics["traces_not_replayable"] == 0
    assert metrics["agent_metric_calls"] <= 16
    seed_val = metrics["step1_agent_val_seed"]
    assert 0.0 <= seed_val <= 1.0 and metrics["step1_agent_val_best"] >= seed_val
    # a changed candidate's replies were read beside production's by the pairwise judge
    kept = metrics["step1_kept"] == 1.0
    assert ("pairwise win rate" in version.tags["flywheel.gate.reason"]) == kept
