from datetime import UTC, datetime

from flows.collect import LabelWindow, collect, load_heldout, summarize, window_start
from infra.agents.intent_router import IntentRouter
from infra.traces import Annotation, TraceBatch, TraceRecord

NOW = datetime(2026, 11, 29, tzinfo=UTC)


def trace(trace_id: str, text: str | None, reply: str) -> TraceRecord:
    messages = [{"role": "system", "content": "s"}] + (
        [{"role": "user", "content": text}] if text else []
    )
    return TraceRecord(
        id=f"o-{trace_id}", trace_id=trace_id, start_time=NOW, input=messages, output=reply
    )


def score(trace_id: str, value, name="correct", data_type="BOOLEAN") -> Annotation:
    return Annotation(
        id=f"s-{trace_id}",
        trace_id=trace_id,
        name=name,
        value=value,
        data_type=data_type,
        source="ANNOTATION",
        timestamp=NOW,
        comment="expected weather",
    )


def test_collect_pairs_annotations_with_traces_and_counts_skips():
    batch = TraceBatch(
        traces=[trace("a", "rain?", "weather"), trace("b", "jazz", "music"), trace("c", None, "x")],
        annotations=[
            score("a", 1.0),
            score("b", 0.0),
            score("c", 1.0),
            score("a", 3.0, name="other"),
            score("b", "good", data_type="CATEGORICAL"),
        ],
    )
    collected = collect(batch, IntentRouter(), "correct")
    assert [e.id for e in collected.examples] == ["a", "b"]
    assert [(i.id, i.human_pass) for i in collected.items] == [("a", True), ("b", False)]
    assert collected.items[0].input_text == "rain?" and collected.items[0].output_text == "weather"
    reasons = [(s.field, s.reason) for s in collected.skipped]
    assert any(field == "input" and "trace c" in reason for field, reason in reasons)
    assert any(field == "value" for field, _ in reasons)  # the categorical score
    assert summarize(collected) == {
        "traces": 2,
        "annotations": 2,
        "annotations_pass": 1,
        "skipped_records": 2,
    }


def test_heldout_file_skips_bad_lines(tmp_path):
    path = tmp_path / "heldout.jsonl"
    path.write_text(
        '{"id": 1, "inputs": {"request": "x"}, "reference": "GetWeather"}\nnot json\n{"id": 2}\n'
    )
    examples = load_heldout(path)
    assert [(e.id, e.reference) for e in examples] == [("1", "GetWeather")]
    assert load_heldout(tmp_path / "missing.jsonl") == []


def test_trace_window_follows_lookback():
    assert window_start(None) is None
    assert window_start(24, now=NOW) == datetime(2026, 11, 28, tzinfo=UTC)


def test_collect_keeps_replies_and_the_label_window():
    later = datetime(2026, 11, 29, 18, tzinfo=UTC)
    batch = TraceBatch(
        traces=[trace("a", "rain?", "weather"), trace("b", "jazz", "music")],
        annotations=[score("a", 1.0), Annotation(**{**vars(score("a", 0.0)), "timestamp": later})],
    )
    fetched = datetime(2026, 11, 30, 2, tzinfo=UTC)
    collected = collect(batch, IntentRouter(), "correct", since=NOW, fetched_at=fetched)
    assert collected.window == LabelWindow(2, NOW, later, NOW, fetched)
    judged = collected.judged_items()
    assert [(i.id, i.input_text, i.output_text, i.human_pass) for i in judged] == [
        ("a", "rain?", "weather", None),
        ("b", "jazz", "music", None),
    ]
