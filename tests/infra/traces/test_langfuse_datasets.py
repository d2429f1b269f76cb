"""Held-out evaluations as a Langfuse dataset and its runs, through the real SDK against a
local fake of Langfuse: an item per example, a run per version with a run item per item
on its own trace, the version's score on that trace; sent twice, nothing twice."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from langfuse.api.commons import Dataset, DatasetItem
from langfuse.api.core.pydantic_utilities import parse_obj_as

from infra.settings import TraceSettings
from infra.traces.heldout_runs import SCORE_NAME, HeldoutItem, HeldoutRun
from infra.traces.jsonl import JsonlTraceSource
from infra.traces.langfuse_datasets import EXPERIMENT_ENVIRONMENT
from infra.traces.langfuse_source import LangfuseTraceSource
from infra.traces.outbox import HELDOUT_RUNS
from infra.traces.source import TraceSourceError
from tests.fake_langfuse_datasets import FakeLangfuseDatasets
from tests.infra.traces.test_fakes_against_the_sdk import unknown_keys

AT = datetime(2026, 12, 7, 2, 0, tzinfo=UTC)
ITEMS = [
    HeldoutItem("t-1", {"question": "refund?"}, None, trace_id="t-1"),
    HeldoutItem("t-2", {"question": "invoice?"}, None, trace_id="t-2"),
    HeldoutItem("h-3", {"question": "hours?"}, "9 to 5"),  # from a held-out file: no trace
]
RUNS = [
    HeldoutRun(
        "agent v6 (production), night n1",
        {"t-1": "no", "t-2": "yes", "h-3": "24/7"},
        {"t-1": 0.0, "t-2": 1.0, "h-3": 0.0},
    ),
    HeldoutRun(
        "agent v7 (candidate), night n1",
        {"t-1": "yes", "t-2": "yes", "h-3": "9 to 5"},
        {"t-1": 1.0, "t-2": 0.75, "h-3": 1.0},
    ),
]


def send(fake: FakeLangfuseDatasets, dataset: str = "flywheel-heldout"):
    source = LangfuseTraceSource(TraceSettings(source="langfuse"), api=fake.sdk_api())
    return source.send_heldout_runs(dataset, ITEMS, RUNS, AT)


def test_each_version_is_a_run_of_the_dataset_with_its_scores_on_its_run_items():
    with FakeLangfuseDatasets() as fake:
        sent = send(fake)
    store = fake.store
    assert sent.dataset == "flywheel-heldout" and sent.items == 3
    assert sent.runs == {run.name: 3 for run in RUNS}
    assert sent.link.endswith(f"/project/proj-fake/datasets/{store.datasets[sent.dataset]['id']}")
    # one item per held-out example, linked to the production trace it was held out from
    items = {item["metadata"]["flywheel_example_id"]: item for item in store.items.values()}
    assert set(items) == {"t-1", "t-2", "h-3"}
    assert {e: item["sourceTraceId"] for e, item in items.items()} == {
        "t-1": "t-1",
        "t-2": "t-2",
        "h-3": None,
    }
    assert items["h-3"]["expectedOutput"] == "9 to 5"
    assert items["t-1"]["input"] == {"question": "refund?"}
    # each run: one run item per dataset item, on a trace of its own holding its score
    runs = store.runs("flywheel-heldout")
    assert set(runs) == {run.name for run in RUNS}
    for run in RUNS:
        linked = runs[run.name]
        assert set(linked) == {item["id"] for item in store.items.values()}
        for item_id, trace in linked.items():
            example = store.items[item_id]["metadata"]["flywheel_example_id"]
            assert store.trace_scores(trace) == {SCORE_NAME: run.scores[example]}
            span = next(a for (t, _), a in store.spans.items() if t == trace)
            assert json.loads(span["langfuse.observation.output"]) == run.replies[example]
            assert span["langfuse.environment"] == EXPERIMENT_ENVIRONMENT
            assert (
                span.get("langfuse.observation.metadata.source_trace_id")
                == (store.items[item_id]["sourceTraceId"])
            )
    # the two runs are two experiments: their traces differ
    assert not set(runs[RUNS[0].name].values()) & set(runs[RUNS[1].name].values())
    # Langfuse takes OpenTelemetry spans at once only with this header
    assert all(h.get("x-langfuse-ingestion-version") == "4" for h in store.headers)


def test_sent_again_nothing_is_added_twice():
    with FakeLangfuseDatasets() as fake:
        send(fake)
        first = (len(fake.store.items), len(fake.store.spans), len(fake.store.scores))
        again = send(fake)  # a resumed night, or a retry after a blip
    assert first == (3, 6, 6)
    assert (len(fake.store.items), len(fake.store.spans), len(fake.store.scores)) == first
    assert len(fake.store.datasets) == 1 and again.runs == {run.name: 3 for run in RUNS}


def test_a_run_holds_only_the_examples_it_has_a_reply_and_a_score_for():
    partial = HeldoutRun("agent v7 (candidate), night n2", {"t-1": "yes"}, {"t-1": 1.0})
    with FakeLangfuseDatasets() as fake:
        source = LangfuseTraceSource(TraceSettings(source="langfuse"), api=fake.sdk_api())
        sent = source.send_heldout_runs("flywheel-heldout", ITEMS, [partial], AT)
    assert sent.runs == {partial.name: 1}
    assert len(fake.store.runs("flywheel-heldout")[partial.name]) == 1


def test_a_langfuse_error_is_a_trace_source_error_naming_the_dataset():
    with FakeLangfuseDatasets() as fake:
        fake.store.fail = "/api/public/otel/v1/traces"
        with pytest.raises(TraceSourceError, match=r"'flywheel-heldout'.*\(500\)"):
            send(fake)


def test_the_fake_answers_in_the_sdks_shapes():
    with FakeLangfuseDatasets() as fake:
        send(fake)
    for model, record in [
        (Dataset, next(iter(fake.store.datasets.values()))),
        (DatasetItem, next(iter(fake.store.items.values()))),
    ]:
        assert unknown_keys(parse_obj_as(model, record)) == []


def test_a_jsonl_source_appends_one_line_per_run_item_to_its_outbox(tmp_path):
    source = JsonlTraceSource(outbox_dir=tmp_path)
    sent = source.send_heldout_runs("flywheel-heldout", ITEMS, RUNS, AT)
    lines = [json.loads(line) for line in (tmp_path / HELDOUT_RUNS).read_text().splitlines()]
    assert sent.runs == {run.name: 3 for run in RUNS} and sent.link == ""
    assert len(lines) == 6
    assert {(line["runName"], line["sourceTraceId"], line["score"]) for line in lines} == {
        (run.name, item.trace_id, run.scores[item.example_id]) for run in RUNS for item in ITEMS
    }
    # the same item ids a Langfuse source gives: an importer keeps each item once
    assert {line["datasetItemId"] for line in lines} == {
        i.item_id("flywheel-heldout") for i in ITEMS
    }
