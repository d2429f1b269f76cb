"""A stage's progress: its unit, total and ETA on the bar, the milestones in the log, a
Prefect progress artifact inside a flow run (none outside one), and training steps heard
from the trainer's own thread."""

import asyncio
import logging

import pytest
from prefect import flow
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
from rich.progress import TimeRemainingColumn

from flows.report.progress import StageProgress, artifact_key
from tests.prefect_harness import prefect_harness


def test_a_bar_counts_in_its_unit_with_an_eta_and_logs_its_milestones(caplog):
    caplog.set_level(logging.INFO, logger="flows.report.progress")
    with StageProgress("judge on the night's traces", 8, "traces judged") as progress:
        for _ in range(8):
            progress.advance()
    task = progress.task
    assert (task.fields["unit"], task.total, task.completed) == ("traces judged", 8, 8)
    assert task.fields["count"] == "8/8 traces judged"
    assert any(isinstance(c, TimeRemainingColumn) for c in progress._progress.columns)
    lines = [r.getMessage() for r in caplog.records if r.name == "flows.report.progress"]
    assert lines[0] == "judge on the night's traces: started (0/8 traces judged)"
    assert lines[1:4] == [
        f"judge on the night's traces: {share}% ({n}/8 traces judged)"
        for share, n in ((25, 2), (50, 4), (75, 6))
    ]
    assert lines[4].startswith("judge on the night's traces: done in ")
    assert lines[4].endswith(", 8/8 traces judged") and len(lines) == 5
    assert progress._artifact is None  # outside a flow run: no Prefect artifact


async def test_a_round_counts_rollouts_then_the_trainer_s_steps_from_its_thread():
    with StageProgress("step 2: LoRA round (sft)", None, "rollouts") as progress:
        progress.expect(4)
        progress.expect(2)  # a second draw, sampled at the same time
        progress.advance(6)
        assert progress.task.fields["count"] == "6/6 rollouts"

        def train():  # as weights.lora's callback calls it: from the training thread
            for step in (1, 2, 3):
                progress.on_train_step(step, 3, {"loss": 0.5 - step / 10, "learning_rate": 1e-4})

        await asyncio.to_thread(train)
        await asyncio.sleep(0)  # what the thread handed to the loop has run
        task = progress.task
        assert (task.fields["unit"], task.total, task.completed) == ("steps", 3, 3)
        assert task.fields["info"] == "loss 0.2000 lr 1.00e-04"
        progress.phase("rollouts")  # the comparisons after training
        progress.expect(3)
        assert progress.task.fields["count"] == "0/3 rollouts"


def test_gepa_counts_metric_calls_and_says_a_new_best(caplog):
    from gepa_opt import BudgetUsed, FrontierChanged

    caplog.set_level(logging.INFO, logger="flows.report.progress")

    def used(calls: int) -> BudgetUsed:
        return BudgetUsed(1, calls, 0, calls, 40, 0)

    def best(score: float, candidates: int) -> FrontierChanged:
        return FrontierChanged(1, 0, score, score, (0,), candidates)

    with StageProgress("judge alignment", 40, "metric calls") as progress:
        progress.on_event(used(10))
        progress.on_event(best(0.4, 1))
        progress.on_event(used(30))
        progress.on_event(best(0.6, 2))
    assert progress.curve == [(10, 0.4), (30, 0.6)]
    assert progress.task.fields["info"] == "best 0.600 candidates 2"
    said = [r.getMessage() for r in caplog.records]
    assert "judge alignment: best 0.600 after 30 metric calls" in said
    assert said[-1].endswith(", 30/40 metric calls, best 0.600")


@pytest.fixture(scope="module")
def harness():
    with prefect_harness():
        yield


async def test_inside_a_flow_run_a_stage_has_a_progress_artifact(harness):
    @flow
    async def night() -> None:
        with StageProgress("held-out evaluation: seed", 40, "rollouts") as progress:
            for _ in range(40):
                progress.advance()
        assert progress._artifact is not None

    await night()
    key = artifact_key("held-out evaluation: seed")
    assert key == "progress-held-out-evaluation-seed"
    async with get_client() as client:
        (artifact,) = await client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key]))
        )
    assert artifact.type == "progress" and artifact.data == 100.0
    assert artifact.description == "held-out evaluation: seed: 40/40 rollouts"
    assert artifact.flow_run_id is not None
