"""A whole night against a model server failing 20% of calls: it completes, counts what
was injected, and scores what succeeded exactly as a night without faults does."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path

import pytest
from mlflow import MlflowClient

from flows.night.fast_slow import split_heldout
from flows.night.runtime import Runtime
from flows.nightly import nightly
from infra.errors import UserFacingError
from infra.settings import Settings
from infra.types import Example
from tests.e2e.test_nightly import small_export
from tests.fake_openai import KINDS, FakeOpenAI, serving
from tests.prefect_harness import prefect_harness

pytestmark = pytest.mark.slow

MARKER = "zz-refused-request"  # in one held-out request: the server always turns it down


def night_settings(tmp_path: Path, name: str, export: Path, base_url: str) -> Settings:
    # one GEPA proposal at a time, so both nights' searches replay call for call
    gepa = {"reflection_minibatch_size": 3, "max_concurrency": 1, "proposal_shape": "1x1"}
    return Settings(
        state_dir=tmp_path / name,
        lm={"backend": "openai", "base_url": base_url, "timeout_s": 0.5, "max_retries": 3},
        traces={"jsonl_dir": str(export)},
        # the fake server's judge is not trusted: the agent's steps run all the same
        judge={
            "max_metric_calls": 20,
            "untrusted_night": "optimize",
            "lora": {"enabled": False},
            **gepa,
        },
        agent_opt={"max_metric_calls": 12, "pareto_size": 4, **gepa},
        lora={"enabled": False},
    )


def run_night(settings: Settings, run_id: str):
    return asyncio.run(nightly(run_id=run_id, knobs=settings.knobs(), runtime=Runtime(settings)))


def written_scores(settings: Settings) -> dict[str, tuple[float, float]]:
    lines = (settings.state_dir / "outbox" / "scores.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    return {r["traceId"]: (r["value"], r["metadata"]["p_pass"]) for r in rows}


def test_a_night_behind_a_flaky_server_scores_what_succeeded_like_a_clean_one(tmp_path):
    export = small_export(tmp_path / "export", traces=36, heldout=12)
    heldout = (export / "heldout.jsonl").read_text().splitlines()
    # the refused request lies where the promotion gate reads, not where steps are chosen,
    # so that both nights choose their steps on the same scores
    rows = [json.loads(line) for line in heldout]
    examples = [Example(r["id"], r["inputs"], r["reference"]) for r in rows]
    _, gated = split_heldout(examples, Settings().fast_slow.selection_share, seed=0)
    k = [r["id"] for r in rows].index(gated[0].id)
    marked = rows[k]
    marked["inputs"]["request"] += f" {MARKER}"
    heldout[k] = json.dumps(marked)
    (export / "heldout.jsonl").write_text("\n".join(heldout) + "\n")

    clean_fake = FakeOpenAI()
    # 30% of a request's first three tries fail (about a fifth of all requests, since
    # a request seen more often than that no longer fails); the SDK makes up to four
    flaky_fake = FakeOpenAI(fault_share=0.3, faults_per_request=3, refuse_marker=MARKER)
    with prefect_harness(), serving(clean_fake) as clean_url, serving(flaky_fake) as url:
        clean_settings = night_settings(tmp_path, "clean", export, clean_url)
        flaky_settings = night_settings(tmp_path, "flaky", export, url)
        clean = run_night(clean_settings, "clean")
        flaky = run_night(flaky_settings, "flaky")

    # faults were injected in earnest, and the night counted each one where it happened
    injected = flaky_fake.injected
    assert sum(injected[k] for k in KINDS) >= 0.15 * flaky_fake.requests
    assert all(injected[k] > 0 for k in KINDS), injected
    counted: Counter[str] = Counter()
    for stage in flaky.calls.values():
        counted.update(stage.attempts_failed)
    assert counted == injected
    # a hang was cancelled by closing its connection, never left running beside its retry
    assert flaky_fake.hangs_abandoned == injected["timeout"] and flaky_fake.hangs_served == 0
    # only the request the server always refuses failed for good, once per evaluation
    failed = {s: f.calls_failed for s, f in flaky.calls.items() if f.failed}
    assert failed["eval_seed"] == {"refused": 1} and set(failed) <= {"eval_seed", "eval_candidate"}
    assert all(f == {"refused": 1} for f in failed.values())
    assert clean_fake.injected == {} and not any(f.failed for f in clean.calls.values())

    # what succeeded scored as without faults: the same judge, the same search, the same
    # per-example scores, the same scores written back
    assert flaky.alignment.judge.prompts == clean.alignment.judge.prompts
    assert flaky.alignment.judge.threshold == clean.alignment.judge.threshold
    assert flaky.prompts == clean.prompts
    assert flaky.steps[0].prompt.metric_calls == clean.steps[0].prompt.metric_calls
    for stage in ("seed", "candidate"):
        scores, expected = flaky.evals[stage].scores, clean.evals[stage].scores
        assert flaky.evals[stage].failed == 1 and clean.evals[stage].failed == 0
        assert scores == {k: v for k, v in expected.items() if k != marked["id"]}
    assert written_scores(flaky_settings) == written_scores(clean_settings)

    # where the judge and people disagree: a table in MLflow and the report
    rows = flaky.feedback.disagreements
    assert rows and rows == clean.feedback.disagreements
    assert all(row["people"] != row["judge"] for row in rows)
    client = MlflowClient(flaky_settings.tracking_uri)
    files = {f.path for f in client.list_artifacts(flaky.registered.mlflow_run_id)}
    assert {"judge_disagreements.json", "report.md"} <= files
    report = client.download_artifacts(flaky.registered.mlflow_run_id, "report.md", str(tmp_path))
    text = Path(report).read_text()
    assert f"disagrees with people on {len(rows)} labelled traces" in text
    # model calls, tokens and faults per stage: in the report and as metrics
    assert "| judge | " in text and "Model calls per stage" in text
    metrics = client.get_run(flaky.registered.mlflow_run_id).data.metrics
    judge = flaky.calls["judge"]
    assert metrics["model_prompt_tokens_judge"] == judge.prompt_tokens == 10 * judge.calls
    assert metrics["model_attempts_failed_judge"] == sum(judge.attempts_failed.values())


def test_a_night_that_fails_leaves_its_mlflow_run_failed_with_what_it_had(tmp_path):
    export = small_export(tmp_path / "export", traces=24, heldout=6)
    # the agent's every call is refused: its held-out evaluation cannot score anything
    fake = FakeOpenAI(refuse_marker="You route requests")
    with prefect_harness(), serving(fake) as url:
        settings = night_settings(tmp_path, "state", export, url)
        # 3 of the 6 held-out examples are the gate's (the rest choose between steps)
        with pytest.raises(UserFacingError, match="Stage 'eval_seed': 3 of 3 model calls"):
            run_night(settings, "doomed")

    client = MlflowClient(settings.tracking_uri)
    (run,) = client.search_runs(
        [client.get_experiment_by_name("flywheel").experiment_id],
        filter_string="tags.`flywheel.run_id` = 'doomed'",
    )
    assert run.info.status == "FAILED"
    metrics = run.data.metrics
    assert metrics["traces_traces"] > 0 and metrics["judge_metric_calls"] > 0  # done before
    assert metrics["model_calls_failed_eval_seed"] == 3 and "collect_seconds" in metrics
    assert run.data.params["seed"] == "0"
    error = client.download_artifacts(run.info.run_id, "error.txt", str(tmp_path))
    assert "eval_seed" in Path(error).read_text()
