"""A night whose window holds no trace (a quiet day), on real parts: the local model,
sqlite MLflow, Prefect. It ends with a report that says what it skipped, never an
exception (issue 57: the second `make demo` died in its first stage)."""

import asyncio
import json

import pytest

from flows.night.runtime import Runtime
from flows.nightly import nightly
from flows.report.summary import render_markdown
from infra.settings import Settings
from tests.e2e.test_nightly import small_export
from tests.prefect_harness import prefect_harness

pytestmark = pytest.mark.slow


def test_a_night_with_no_traces_in_its_window_skips_what_needs_them_and_says_so(tmp_path):
    # the export's traces are months old: a one-hour lookback finds none of them, and
    # the labels on them still reach the label store, as on a real quiet day
    export = small_export(tmp_path / "export", heldout=6)
    settings = Settings(
        state_dir=tmp_path / "state",
        traces={"jsonl_dir": str(export), "lookback_hours": 1},
        judge={"max_metric_calls": 0, "untrusted_night": "optimize"},
    )
    with Runtime(settings) as rt, prefect_harness():
        report = asyncio.run(nightly(run_id="quiet", knobs=settings.knobs(), runtime=rt))

    assert report.collected["traces"] == 0 and report.collected["annotations"] > 0
    assert report.steps and report.prompts == report.seed_prompts  # nothing was optimized
    text = render_markdown(report)
    for step in report.steps:
        assert f"{step.line()}." in text
        assert step.decision.reason == "not run: no traces in the night's window to learn from"
    assert "Labels requested: none; no traces in the night's window to judge." in text
    assert "Scores written: none; no traces in the night's window to judge." in text
    assert report.registered is not None and not report.promotion.passed
    # the held-out evaluations went to the source's dataset, with the report's own scores
    outbox = settings.state_dir / "outbox" / "heldout_runs.jsonl"
    lines = [json.loads(line) for line in outbox.read_text().splitlines()]
    sent = report.heldout_dataset
    assert set(sent.runs) == {line["runName"] for line in lines} and len(sent.runs) == 2
    for label, evaluation in report.evals.items():
        (name,) = [n for n in sent.runs if f"({'production' if label == 'seed' else label})" in n]
        run = sorted(line["score"] for line in lines if line["runName"] == name)
        assert run == sorted(evaluation.scores.values()) and run
    assert sent.lines()[0] in text
