"""The deployment as a team runs it: `prefect deploy` from prefect.yaml onto a Prefect
server, a run with a knob overridden, and a process worker that runs it once."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from prefect import get_client
from prefect.settings import get_current_settings

from infra.settings import Settings
from tests.e2e.test_nightly import small_export
from tests.fake_openai import FakeOpenAI, serving
from tests.prefect_harness import prefect_harness

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def prefect(env: dict[str, str], *args: str, timeout: float = 300) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "prefect", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, f"prefect {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


async def the_flow_run(name: str):
    async with get_client() as client:
        (deployment,) = [d for d in await client.read_deployments() if d.name == name]
        # the schedule made runs of its own, for later nights: ours has the knobs (and
        # its night is a subflow run)
        runs = await client.read_flow_runs()
        (run,) = [r for r in runs if r.deployment_id == deployment.id and r.parameters.get("knobs")]
        logs = await client.read_logs()
        night = {run.id} | {r.id for r in runs if r.parent_task_run_id is not None}
        return (
            deployment,
            run,
            [(log.name, log.message) for log in logs if log.flow_run_id in night],
        )


def test_prefect_yaml_deploys_the_night_and_a_worker_runs_it_with_a_knob_overridden(tmp_path):
    export = small_export(tmp_path / "export", traces=30, heldout=6)
    state = tmp_path / "state"
    knobs = Settings().knobs()
    knobs.seed = 7
    knobs.judge.max_metric_calls, knobs.agent_opt.max_metric_calls = 12, 9
    knobs.agent_opt.pareto_size = 3
    knobs.lora.enabled = knobs.judge.lora.enabled = False
    with prefect_harness(), serving(FakeOpenAI()) as model_url:
        env = {
            **os.environ,
            "PREFECT_API_URL": get_current_settings().api.url,
            "PREFECT_HOME": str(tmp_path / "prefect-home"),
            "FLYWHEEL_HOME": str(ROOT),
            "FLYWHEEL_STATE_DIR": str(state),
            "FLYWHEEL_LM__BACKEND": "openai",
            "FLYWHEEL_LM__BASE_URL": model_url,
            "FLYWHEEL_TRACES__JSONL_DIR": str(export),
        }
        prefect(env, "work-pool", "create", "flywheel", "--type", "process")
        prefect(env, "--no-prompt", "deploy", "--all")
        params = json.dumps({"knobs": knobs.model_dump(mode="json")})
        prefect(env, "deployment", "run", "nightly-scheduled/nightly", "--params", params)
        prefect(env, "worker", "start", "--pool", "flywheel", "--run-once", timeout=600)
        deployment, run, logs = asyncio.run(the_flow_run("nightly"))

    # one night at a time (prefect.yaml): a night due while one runs cancels itself
    assert deployment.global_concurrency_limit.limit == 1, deployment
    assert deployment.concurrency_options.collision_strategy == "CANCEL_NEW"
    assert deployment.schedules
    assert run.state.is_completed(), run.state
    assert run.parameters["knobs"]["seed"] == 7
    # the night ran on the overridden knobs: its MLflow run says so
    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{state.resolve()}/mlflow.db")
    runs = mlflow.search_runs(search_all_experiments=True, output_format="list")
    # the night's own run; its held-out evaluations are child runs under it
    (night,) = [run for run in runs if "mlflow.parentRunId" not in run.data.tags]
    assert night.data.params["seed"] == "7"
    assert night.data.metrics["agent_metric_calls"] <= 9
    # flywheel's own log lines reach the run's logs in Prefect (the malformed line skipped)
    ours = [message for name, message in logs if name.split(".")[0] in ("infra", "flows")]
    assert any("skipped" in message for message in ours), logs[:10]
    # and its progress: each stage's start and end
    assert any("judge alignment: done in" in message for message in ours), ours
