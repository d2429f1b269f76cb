"""Labels accumulate: the store, incremental reads from both sources, and two nights."""

import json
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from langfuse.api.core.pydantic_utilities import parse_obj_as
from langfuse.api.dataset_items.types.paginated_dataset_items import PaginatedDatasetItems
from langfuse.api.observations.types.observations_v2response import ObservationsV2Response
from langfuse.api.scores.types.get_scores_v3response import GetScoresV3Response

from flows.night.runtime import Runtime
from flows.nightly import collect_traces
from infra.labels import LabelStore, _dump
from infra.settings import Settings, TraceSettings
from infra.traces import Annotation, JsonlTraceSource, RecordError, TraceRecord
from infra.traces.langfuse_source import LangfuseTraceSource
from tests.fakes import ScriptedLM

DAY1 = datetime(2026, 11, 28, 9, tzinfo=UTC)


def trace(trace_id: str, at: datetime = DAY1) -> TraceRecord:
    return TraceRecord(f"o-{trace_id}", trace_id, at, input=f"play {trace_id}", output="PlayMusic")


def label(
    trace_id: str, value: float, at: datetime = DAY1, name: str = "correct", by: str = "ann"
) -> Annotation:
    """A person's label: `by` names the annotation (a later one with the same is an edit)."""
    return Annotation(f"s-{trace_id}-{by}", trace_id, name, value, "BOOLEAN", "ANNOTATION", at)


def test_the_store_keeps_each_persons_label_per_trace_the_latest_edit_winning(tmp_path):
    store = LabelStore(tmp_path / "labels.sqlite")
    later = DAY1 + timedelta(hours=5)
    assert (
        store.add([label("a", 1.0), label("b", 0.0), label("x", 1.0)], [trace("a"), trace("b")])
        == 2
    )
    assert store.add([label("a", 0.0, later)], [trace("a")]) == 1  # an edit
    assert store.add([label("a", 1.0)], [trace("a")]) == 0  # an older read of it
    reopened = LabelStore(tmp_path / "labels.sqlite")
    found = [(a.trace_id, a.value, t.user_text) for a, t in reopened.labels("correct")]
    assert found == [("b", 0.0, "play b"), ("a", 0.0, "play a")]  # oldest first; x: no trace
    assert [a.trace_id for a, _ in reopened.labels("correct", since=later)] == ["a"]
    assert reopened.labels("other") == []
    assert store.add([label("a", 1.0, later, by="other")], [trace("a")]) == 1  # a second person
    assert sorted(a.value for a, _ in store.labels("correct") if a.trace_id == "a") == [0.0, 1.0]
    assert reopened.watermark("correct") is None
    reopened.advance_watermark("correct", later)
    reopened.advance_watermark("correct", DAY1)  # never back
    reopened.mark_requested(["b", "c"], later)
    assert store.watermark("correct") == later and store.requested() == {"b", "c"}


def test_a_store_made_with_one_label_per_trace_is_migrated_keeping_its_labels(tmp_path):
    import sqlite3

    path = tmp_path / "labels.sqlite"
    old = sqlite3.connect(path)
    old.executescript(
        "create table labels (trace_id text not null, name text not null, stamp text not null,"
        " annotation text not null, trace text not null, primary key (trace_id, name));"
    )
    kept = label("a", 1.0)
    old.execute(
        "insert into labels values (?, ?, ?, ?, ?)",
        ("a", "correct", DAY1.isoformat(), _dump(kept), _dump(trace("a"))),
    )
    old.commit()
    old.close()
    store = LabelStore(path)
    assert store.labels("correct") == [(kept, trace("a"))]
    assert store.add([label("a", 0.0, by="other")], [trace("a")]) == 1
    assert len(store.labels("correct")) == 2


def export(folder, traces: list[TraceRecord], labels: list[Annotation]):
    folder.mkdir(exist_ok=True)
    observations = [
        {
            "id": t.id,
            "traceId": t.trace_id,
            "type": "GENERATION",
            "startTime": t.start_time.isoformat(),
            "input": t.input,
            "output": t.output,
        }
        for t in traces
    ]
    scores = [
        {
            "id": a.id,
            "traceId": a.trace_id,
            "name": a.name,
            "value": a.value,
            "dataType": a.data_type,
            "source": a.source,
            "timestamp": a.timestamp.isoformat(),
            "comment": a.comment,
            "updatedAt": a.updated_at.isoformat() if a.updated_at else None,
        }
        for a in labels
    ]
    for name, rows in (("observations.jsonl", observations), ("scores.jsonl", scores)):
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_a_jsonl_source_reads_labels_since_a_moment_with_their_traces_however_old(tmp_path):
    old = DAY1 - timedelta(days=30)
    export(
        tmp_path,
        [trace("old", old), trace("new")],
        [label("old", 1.0, DAY1), label("new", 0.0, old), label("new", 1.0, DAY1, name="tone")],
    )
    batch = JsonlTraceSource(tmp_path).fetch_labels("correct", since=DAY1)
    assert [(a.trace_id, a.name) for a in batch.annotations] == [("old", "correct")]
    assert [t.trace_id for t in batch.traces] == ["old"]
    assert JsonlTraceSource(tmp_path).fetch_labels("correct", DAY1, have={"old"}).traces == []


def test_langfuse_labels_are_read_by_name_and_time_and_their_traces_by_id():
    scores = [
        {
            "id": f"s{i}",
            "projectId": "p",
            "name": "correct",
            "dataType": "BOOLEAN",
            "value": 1,
            "source": "ANNOTATION",
            "timestamp": "2026-11-28T09:00:00Z",
            "environment": "default",
            "createdAt": "2026-11-28T09:00:00Z",
            "updatedAt": "2026-11-28T09:00:00Z",
            "subject": {"kind": "trace", "id": f"t{i}"},
        }
        for i in (1, 2)
    ]
    calls = {"scores": [], "observations": []}

    def get_scores(**params):
        calls["scores"].append(params)
        return parse_obj_as(GetScoresV3Response, {"data": scores, "meta": {"limit": 100}})

    def get_observations(**params):
        calls["observations"].append(params)
        tid = params["trace_id"]
        data = [
            {
                "id": f"o-{tid}",
                "traceId": tid,
                "projectId": "p",
                "type": "GENERATION",
                "startTime": "2026-10-01T10:00:00Z",
                "input": "play",
                "output": "PlayMusic",
            }
        ]
        return parse_obj_as(ObservationsV2Response, {"data": data, "meta": {}})

    api = SimpleNamespace(
        scores=SimpleNamespace(get_many=get_scores),
        observations=SimpleNamespace(get_many=get_observations),
    )
    batch = LangfuseTraceSource(TraceSettings(), api=api).fetch_labels("correct", DAY1)
    assert [a.trace_id for a in batch.annotations] == ["t1", "t2"]
    assert [t.trace_id for t in batch.traces] == ["t1", "t2"]  # a month older than the labels
    asked = calls["scores"][0]
    assert (asked["name"], asked["source"], asked["from_timestamp"]) == (
        "correct",
        "ANNOTATION",
        DAY1,
    )
    assert [c["trace_id"] for c in calls["observations"]] == ["t1", "t2"]
    calls["observations"].clear()
    held = LangfuseTraceSource(TraceSettings(), api=api).fetch_labels("correct", DAY1, {"t1"})
    assert [t.trace_id for t in held.traces] == ["t2"]  # t1 is the caller's already
    assert [c["trace_id"] for c in calls["observations"]] == ["t2"]


async def test_a_label_added_after_a_night_on_an_old_trace_is_used_by_the_next(tmp_path):
    now = datetime.now(UTC)
    old = now - timedelta(days=5)  # older than the 24 h lookback
    folder = tmp_path / "export"
    traces = [trace("old", old)] + [trace(f"t{i}", now - timedelta(hours=2)) for i in range(4)]
    first_labels = [label(f"t{i}", float(i % 2), now - timedelta(hours=1)) for i in range(4)]
    export(folder, traces, first_labels)
    settings = Settings(
        state_dir=tmp_path / "state", traces={"jsonl_dir": str(folder), "lookback_hours": 24}
    )
    rt = Runtime(settings, lm=ScriptedLM())

    night1 = await collect_traces.fn(rt, "n1")
    assert {i.id for i in night1.items} == {"t0", "t1", "t2", "t3"}
    assert night1.labels_new == 4
    rt.labels.advance_watermark("correct", night1.labels_read_to)  # the night succeeded

    # a person labels the five-day-old trace after night 1 (active learning asked for it)
    rt.labels.mark_requested(["old"], now)
    export(folder, traces, first_labels + [label("old", 1.0, datetime.now(UTC))])
    night2 = await collect_traces.fn(rt, "n2")
    assert "old" not in {e.id for e in night2.examples}  # not in tonight's traffic
    assert {i.id for i in night2.items} == {"old", "t0", "t1", "t2", "t3"}  # all to date
    assert (night2.labels_new, night2.labels_answered) == (1, 1)


def test_a_langfuse_dataset_gives_held_out_examples_and_names_a_bad_item():
    def item(i, value, status="ACTIVE"):
        return {
            "id": f"d{i}",
            "status": status,
            "input": value,
            "expectedOutput": "PlayMusic",
            "metadata": None,
            "mediaReferences": [],
            "datasetId": "ds",
            "datasetName": "golden",
            "createdAt": "2026-11-01T00:00:00Z",
            "updatedAt": "2026-11-01T00:00:00Z",
        }

    pages = [[item(1, {"request": "play jazz"}), item(2, {"request": "x"}, "ARCHIVED")]]

    def listing(**params):
        page = params["page"]
        meta = {"page": page, "limit": params["limit"], "totalItems": 2, "totalPages": 1}
        return parse_obj_as(PaginatedDatasetItems, {"data": pages[page - 1], "meta": meta})

    api = SimpleNamespace(dataset_items=SimpleNamespace(list=listing))
    source = LangfuseTraceSource(TraceSettings(), api=api)
    examples = source.dataset_examples("golden")
    assert [(e.id, e.inputs, e.reference) for e in examples] == [
        ("d1", {"request": "play jazz"}, "PlayMusic")
    ]  # the archived item is left out
    pages[0] = [item(3, "play jazz")]
    with pytest.raises(RecordError, match="item d3") as refused:
        source.dataset_examples("golden")
    assert refused.value.field == "input"
    pages[0] = [item(4, {"request": json.loads("[" * 600 + "]" * 600)})]
    with pytest.raises(RecordError, match="item d4: nested more than 100 levels deep"):
        source.dataset_examples("golden")
