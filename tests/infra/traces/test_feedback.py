"""Label requests and judge scores: their checks, and the JSONL source's outbox."""

import json
from datetime import UTC, datetime

import pytest

from infra.settings import TraceSettings
from infra.traces import JudgeScore, LabelRequest, RecordError, annotation_from_score
from infra.traces.factory import make_trace_source
from infra.traces.jsonl import JsonlTraceSource
from infra.traces.source import TraceSourceError

AT = datetime(2026, 11, 30, 3, 0, tzinfo=UTC)


def score(trace_id: str = "t1", **overrides) -> JudgeScore:
    fields = {
        "id": f"s-{trace_id}",
        "trace_id": trace_id,
        "name": "flywheel_judge",
        "value": 1.0,
        "timestamp": AT,
        "comment": "the reply names the right intent",
        "metadata": {"judge_version": "agent-judge-rubric v2", "threshold": 0.41},
    }
    return JudgeScore(**(fields | overrides))


def request(trace_id: str = "t1") -> LabelRequest:
    return LabelRequest(trace_id, "judge least sure: p_pass 0.43", 0.02, "agent-judge-rubric v2")


def lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_outbox_appends_label_requests_and_scores_in_langfuse_shape(tmp_path):
    export, outbox = tmp_path / "export", tmp_path / "state" / "outbox"
    export.mkdir()
    source = make_trace_source(TraceSettings(jsonl_dir=str(export)), tmp_path / "state")
    assert source.request_labels([request("t1"), request("t2")]) == 2
    assert source.request_labels([request("t3")]) == 1  # appended: earlier nights stay
    assert source.write_scores([score("t1"), score("t2", value=0.0, comment=None)]) == 2
    assert source.request_labels([]) == 0 and source.write_scores([]) == 0

    asked = lines(outbox / "label_requests.jsonl")
    assert [a["objectId"] for a in asked] == ["t1", "t2", "t3"]
    assert source.pending_label_requests() == {"t1", "t2", "t3"}  # the next night skips them
    assert asked[0] | {"createdAt": None} == {
        "objectId": "t1",
        "objectType": "TRACE",
        "reason": "judge least sure: p_pass 0.43",
        "margin": 0.02,
        "judgeVersion": "agent-judge-rubric v2",
        "createdAt": None,
    }
    written = lines(outbox / "scores.jsonl")
    assert written[0]["source"] == "API" and written[0]["timestamp"] == "2026-11-30T03:00:00Z"
    # The shape reads back as what Langfuse would hold: a machine score, not a human label.
    back = [annotation_from_score(s) for s in written]
    assert [(a.trace_id, a.value, a.is_human) for a in back] == [
        ("t1", 1.0, False),
        ("t2", 0.0, False),
    ]
    assert back[0].metadata["judge_version"] == "agent-judge-rubric v2"
    assert back[0].comment == "the reply names the right intent" and back[1].comment is None
    assert list(export.iterdir()) == []  # the export folder is never written to


def test_outbox_folder_from_settings_wins(tmp_path):
    settings = TraceSettings(outbox_dir=str(tmp_path / "elsewhere"))
    make_trace_source(settings, tmp_path / "state").write_scores([score()])
    assert (tmp_path / "elsewhere" / "scores.jsonl").is_file()


def test_outbox_errors_say_how_to_fix(tmp_path):
    with pytest.raises(TraceSourceError, match="outbox_dir"):
        JsonlTraceSource(tmp_path).request_labels([request()])
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(TraceSourceError, match="OUTBOX_DIR"):
        JsonlTraceSource(tmp_path, outbox_dir=blocker / "outbox").write_scores([score()])


@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"trace_id": ""}, "trace_id"),
        ({"value": 0.7}, "value"),  # BOOLEAN is 0 or 1
        ({"value": True}, "value"),
        ({"kind": "categorical"}, "value"),
        ({"kind": "numeric", "value": "4"}, "value"),
        ({"kind": "numeric", "value": float("inf")}, "value"),
        ({"kind": "CATEGORICAL", "value": "good"}, "kind"),  # Langfuse's name is not a kind
        ({"kind": "text"}, "kind"),
        ({"timestamp": datetime(2026, 11, 30)}, "timestamp"),  # naive
        ({"name": ""}, "name"),
    ],
)
def test_bad_scores_name_the_trace_and_field(overrides, field):
    with pytest.raises(RecordError) as err:
        score(**({"trace_id": "t7"} | overrides))
    assert err.value.field == field
    if field != "trace_id":
        assert "t7" in str(err.value)


def test_a_score_says_its_kind_by_langfuses_name():
    assert score().kind == "boolean" and score().data_type == "BOOLEAN"  # pass/fail by default
    assert score(kind="categorical", value="polite").data_type == "CATEGORICAL"
    assert score(kind="numeric", value=4.5).data_type == "NUMERIC"


def test_outbox_writes_each_kind_as_the_langfuse_score_it_reads_back_as(tmp_path):
    source = make_trace_source(TraceSettings(jsonl_dir=str(tmp_path)), tmp_path / "state")
    scores = [
        score("t1", value=0.0),
        score("t2", kind="categorical", value="polite"),
        score("t3", kind="numeric", value=4.5),
    ]
    assert source.write_scores(scores) == 3
    written = lines(tmp_path / "state" / "outbox" / "scores.jsonl")
    assert [(w["dataType"], w["value"], w.get("stringValue")) for w in written] == [
        ("BOOLEAN", 0.0, "False"),
        ("CATEGORICAL", "polite", "polite"),
        ("NUMERIC", 4.5, None),
    ]
    back = [annotation_from_score(w) for w in written]
    assert [(a.kind, a.value) for a in back] == [
        ("boolean", 0.0),
        ("categorical", "polite"),
        ("numeric", 4.5),
    ]


def test_bad_label_requests_name_the_field():
    with pytest.raises(RecordError, match="trace_id"):
        LabelRequest("", "why", 0.1, "v1")
    with pytest.raises(RecordError, match="margin"):
        LabelRequest("t1", "why", float("nan"), "v1")


def test_an_unreadable_outbox_line_costs_only_itself(tmp_path, caplog):
    source = make_trace_source(TraceSettings(jsonl_dir=str(tmp_path)), tmp_path / "state")
    assert source.pending_label_requests() == set()  # nothing asked yet
    source.request_labels([request("t1")])
    path = tmp_path / "state" / "outbox" / "label_requests.jsonl"
    path.write_text(path.read_text() + '{"objectType": "TRACE"}\nnot json\n')
    source.request_labels([request("t2")])
    assert source.pending_label_requests() == {"t1", "t2"}
    assert "label_requests.jsonl:2: field objectId" in caplog.text
