"""A quiet night with a second annotation name, on real parts (the local model, sqlite
MLflow, Prefect): its labels reach the store, its own judge is fitted, gated and
registered beside the primary's, both versions' held-out replies are judged on it, and
the report has its line."""

import asyncio
import json

import pytest

from flows.night.runtime import Runtime
from flows.nightly import nightly
from flows.report.summary import render_markdown
from infra.settings import Settings
from judges.versions import judge_prompt_name
from tests.e2e.test_nightly import small_export
from tests.prefect_harness import prefect_harness

pytestmark = pytest.mark.slow


def test_a_second_annotation_name_gets_its_own_judge_version_and_gate_line(tmp_path):
    export = small_export(tmp_path / "export", heldout=6)
    scores = export / "scores.jsonl"
    lines = [json.loads(line) for line in scores.read_text().splitlines()[:-1]]  # no bad one
    concise = [
        row | {"id": f"concise-{row['id']}", "name": "concise"}
        for row in lines
        if row["name"] == "correct"
    ]
    with scores.open("a") as out:
        out.writelines(json.dumps(row) + "\n" for row in concise)
    settings = Settings(
        state_dir=tmp_path / "state",
        traces={
            "jsonl_dir": str(export),
            "lookback_hours": 1,
            "criteria": {"concise": {"weight": 0.5, "max_drop": 0.1}},
        },
        judge={"max_metric_calls": 0, "untrusted_night": "optimize"},
    )
    with Runtime(settings) as rt, prefect_harness():
        report = asyncio.run(nightly(run_id="two", knobs=settings.knobs(), runtime=rt))
        store, name = rt.labels, judge_prompt_name(rt.registry, "rubric", "concise")

    (criterion,) = report.criteria
    assert criterion.name == "concise" and criterion.alignment.metric_calls == 0
    assert criterion.gate.registered == {name: 1}
    assert len(store.labels("concise")) == len(concise)
    assert store.watermark("concise") is not None  # read from there next night
    (verdict,) = report.promotion.criteria
    assert verdict.name == "concise" and verdict.examples > 0
    assert verdict.gain.value == 0.0  # nothing was optimized: the candidate is production
    text = render_markdown(report)
    assert f"Criterion concise (weight 0.5, max_drop 0.1): judge {name} v1" in text
    assert f"criterion concise {verdict.production:.3f} -> " in report.promotion.reason
    assert "criterion_concise_heldout_gain" in report.metrics()
