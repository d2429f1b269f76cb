"""Langfuse sessions: each turn carries the conversation before it, and a score on a whole
session is read onto its last trace, from a JSONL export and from the API alike."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from types import SimpleNamespace

from langfuse.api.core.pydantic_utilities import parse_obj_as
from langfuse.api.observations.types.observations_v2response import ObservationsV2Response
from langfuse.api.scores.types.get_scores_v3response import GetScoresV3Response

from flows.night.collect import one_record_per_trace
from infra.labels import LabelStore
from infra.settings import TraceSettings
from infra.traces.jsonl import JsonlTraceSource
from infra.traces.langfuse_source import LangfuseTraceSource
from infra.traces.mapping import annotation_from_score, trace_from_observation
from infra.traces.sessions import MAX_TURNS, in_sessions, on_last_traces

SINCE = datetime(2025, 3, 1, tzinfo=UTC)


def turn(trace: str, hour: int, said: str, reply: str, session: str | None = "s1") -> dict:
    """One turn of a conversation as Langfuse's observations API gives it."""
    found = {
        "id": f"o-{trace}",
        "traceId": trace,
        "projectId": "p",
        "type": "GENERATION",
        "startTime": f"2025-03-02T{hour:02d}:00:00Z",
        "input": [{"role": "user", "content": said}],
        "output": reply,
    }
    return found | ({"sessionId": session} if session else {})


TALK = [
    turn("t1", 9, "I need a room for Tuesday.", "Which time?"),
    turn("t2", 10, "At ten, please.", "Booked Tuesday 10:00."),
    turn("t3", 11, "Thanks!", "You are welcome."),
    turn("x1", 10, "play jazz", "Playing jazz.", session=None),
]


def session_score(score_id: str, session: str, value: float, hour: int = 12) -> dict:
    """People's score on a whole session, in the flat export's shape."""
    return {
        "id": score_id,
        "sessionId": session,
        "name": "correct",
        "value": value,
        "dataType": "BOOLEAN",
        "source": "ANNOTATION",
        "timestamp": f"2025-03-02T{hour:02d}:30:00Z",
    }


def test_a_sessions_score_maps_with_no_trace_in_either_layout():
    flat = annotation_from_score(session_score("s9", "s1", 1.0))
    assert (flat.trace_id, flat.session_id) == ("", "s1")
    v3 = {**session_score("s9", "s1", 1.0), "subject": {"kind": "session", "id": "s1"}}
    del v3["sessionId"]
    assert annotation_from_score(v3).session_id == "s1"
    assert trace_from_observation(TALK[0]).session_id == "s1"
    assert trace_from_observation(TALK[3]).session_id is None


def test_each_turn_carries_the_conversation_before_it():
    traces = {t.trace_id: t for t in in_sessions([trace_from_observation(o) for o in TALK])}
    assert traces["t1"].conversation == ()
    assert traces["t3"].conversation == (
        ("I need a room for Tuesday.", "Which time?"),
        ("At ten, please.", "Booked Tuesday 10:00."),
    )
    assert traces["x1"].conversation == ()  # in no session


def test_a_long_conversation_keeps_its_last_turns():
    long = [turn(f"t{h}", h, f"ask {h}", f"said {h}") for h in range(MAX_TURNS + 4)]
    last = in_sessions([trace_from_observation(o) for o in long])[-1]
    assert len(last.conversation) == MAX_TURNS and last.conversation[-1] == ("ask 10", "said 10")


def test_a_sessions_score_lands_on_its_last_trace_made_before_it():
    traces = [trace_from_observation(o) for o in TALK]
    early = annotation_from_score(session_score("s8", "s1", 0.0, hour=10))  # before t3
    late = annotation_from_score(session_score("s9", "s1", 1.0, hour=12))
    lost = annotation_from_score(session_score("s7", "gone", 1.0))
    skipped = []
    kept = on_last_traces([early, late, lost], traces, skipped)
    assert [(a.id, a.trace_id) for a in kept] == [("s8", "t2"), ("s9", "t3")]
    (named,) = skipped
    assert named.field == "sessionId" and "s7" in named.reason and "gone" in named.reason


def export(tmp_path, scores: list[dict]):
    (tmp_path / "observations.jsonl").write_text("\n".join(json.dumps(o) for o in TALK))
    (tmp_path / "scores.jsonl").write_text("\n".join(json.dumps(s) for s in scores))
    return JsonlTraceSource(tmp_path)


def test_an_export_reads_a_sessions_score_onto_its_last_trace(tmp_path):
    source = export(tmp_path, [session_score("s9", "s1", 1.0)])
    batch = source.fetch(since=None, limit=100)
    (label,) = batch.annotations
    assert (label.trace_id, label.session_id) == ("t3", "s1")
    labels = source.fetch_labels("correct", None, have={"t1", "t2", "t3"})
    assert [a.trace_id for a in labels.annotations] == ["t3"]
    # the session's traces come with it, held or not: its last one and the talk before
    assert {t.trace_id for t in labels.traces} == {"t1", "t2", "t3"}


def test_the_label_store_keeps_a_session_labels_conversation(tmp_path):
    batch = export(tmp_path, [session_score("s9", "s1", 1.0)]).fetch(since=None, limit=100)
    store = LabelStore(tmp_path / "labels.sqlite")
    assert store.add(batch.annotations, one_record_per_trace(batch.traces, [])) == 1
    ((label, trace),) = store.labels("correct")
    assert label.session_id == "s1" and trace.trace_id == "t3"
    assert trace.conversation[-1] == ("At ten, please.", "Booked Tuesday 10:00.")


def test_the_api_fetches_a_scored_sessions_traces_by_session():
    calls = []

    def get_scores(**params):
        found = {**session_score("s9", "s1", 1.0), "projectId": "p", "value": True}
        del found["sessionId"]
        found |= {"subject": {"kind": "session", "id": "s1"}, "environment": "default"}
        found |= {"createdAt": found["timestamp"], "updatedAt": found["timestamp"]}
        return parse_obj_as(GetScoresV3Response, {"data": [found], "meta": {"limit": 100}})

    def get_observations(**params):
        calls.append(params)
        data = [o for o in TALK if o.get("sessionId") == params.get("session_id")]
        return parse_obj_as(ObservationsV2Response, {"data": data, "meta": {}})

    api = SimpleNamespace(
        scores=SimpleNamespace(get_many=get_scores),
        observations=SimpleNamespace(get_many=get_observations),
    )
    batch = LangfuseTraceSource(TraceSettings(), api=api).fetch_labels("correct", SINCE)
    assert [c["session_id"] for c in calls] == ["s1"]
    assert [a.trace_id for a in batch.annotations] == ["t3"]
    assert in_sessions(one_record_per_trace(batch.traces, []))[-1].conversation[0][0] == (
        "I need a room for Tuesday."
    )
