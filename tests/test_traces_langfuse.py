"""LangfuseTraceSource against a fake of the SDK's `api` object.

Pages are built the way the SDK builds them: `parse_obj_as` on the server's camelCase
JSON into the SDK's own response models.
"""

import json
from datetime import UTC, datetime

import pytest
from langfuse.api.core.api_error import ApiError
from langfuse.api.core.pydantic_utilities import parse_obj_as
from langfuse.api.observations.types.observations_v2response import ObservationsV2Response
from langfuse.api.scores.types.get_scores_v3response import GetScoresV3Response

from infra.settings import TraceSettings
from infra.traces.langfuse_source import LangfuseTraceSource
from infra.traces.source import TraceSourceError

SINCE = datetime(2025, 3, 1, tzinfo=UTC)


def obs(i: int) -> dict:
    return {
        "id": f"o{i}",
        "traceId": f"t{i}",
        "projectId": "p",
        "type": "GENERATION",
        "startTime": f"2025-03-0{i}T10:00:00Z",
        "name": "route",
        "input": json.dumps([{"role": "user", "content": f"question {i}"}]),
        "output": "card_arrival",
        "promptName": "router",
        "promptVersion": 2,
        "tags": ["prod"],
    }


def score(i: int, subject: dict | None = None) -> dict:
    return {
        "id": f"s{i}",
        "projectId": "p",
        "name": "correct",
        "dataType": "BOOLEAN",
        "value": i % 2 == 1,
        "source": "ANNOTATION",
        "timestamp": "2025-03-05T10:00:00Z",
        "environment": "default",
        "createdAt": "2025-03-05T10:00:00Z",
        "updatedAt": "2025-03-05T10:00:00Z",
        "subject": subject or {"kind": "trace", "id": f"t{i}"},
    }


class FakeListing:
    """One `get_many` endpoint: serves pages by cursor and records every call."""

    def __init__(self, model, pages: list[list[dict]], meta: dict):
        self.calls: list[dict] = []
        self._pages = [
            parse_obj_as(
                model,
                {
                    "data": page,
                    "meta": {**meta, "cursor": str(n + 1) if n + 1 < len(pages) else None},
                },
            )
            for n, page in enumerate(pages)
        ]

    def get_many(self, **params):
        self.calls.append(params)
        return self._pages[int(params["cursor"] or 0)]


class FakeApi:
    def __init__(self, observation_pages, score_pages):
        self.observations = FakeListing(ObservationsV2Response, observation_pages, {})
        self.scores = FakeListing(GetScoresV3Response, score_pages, {"limit": 100})


def test_pages_through_generations_and_annotation_scores():
    api = FakeApi(
        [[obs(1), obs(2)], [obs(3)]],
        [[score(1), score(2)], [score(3, {"kind": "observation", "id": "o3", "traceId": "t3"})]],
    )
    batch = LangfuseTraceSource(TraceSettings(trace_name="support"), api=api).fetch(SINCE, 10)

    assert [t.id for t in batch.traces] == ["o1", "o2", "o3"]
    assert batch.traces[0].user_text == "question 1"
    assert batch.traces[0].start_time == datetime(2025, 3, 1, 10, tzinfo=UTC)
    assert [(a.trace_id, a.value) for a in batch.annotations] == [
        ("t1", 1.0),
        ("t2", 0.0),
        ("t3", 1.0),
    ]
    assert batch.annotations[2].observation_id == "o3"

    first = api.observations.calls[0]
    assert first["cursor"] is None and first["fields"] == "basic,io,metadata,prompt,trace_context"
    conditions = json.loads(first["filter"])
    assert {
        "type": "string",
        "column": "type",
        "operator": "=",
        "value": "GENERATION",
    } in conditions
    assert {
        "type": "datetime",
        "column": "startTime",
        "operator": ">=",
        "value": "2025-03-01T00:00:00Z",
    } in conditions
    assert {
        "type": "string",
        "column": "traceName",
        "operator": "=",
        "value": "support",
    } in conditions
    assert api.observations.calls[1]["cursor"] == "1"

    scores_call = api.scores.calls[0]
    assert scores_call["source"] == "ANNOTATION" and scores_call["from_timestamp"] == SINCE
    assert scores_call["fields"] == "details,subject" and scores_call["limit"] == 100
    assert len(api.scores.calls) == 2


def test_limit_stops_paging_and_drops_scores_of_other_traces():
    api = FakeApi([[obs(1), obs(2)], [obs(3)]], [[score(1), score(3)]])
    batch = LangfuseTraceSource(TraceSettings(), api=api).fetch(None, 2)
    assert [t.id for t in batch.traces] == ["o1", "o2"]
    assert len(api.observations.calls) == 1  # the second page was never asked for
    assert [a.trace_id for a in batch.annotations] == ["t1"]
    assert len(json.loads(api.observations.calls[0]["filter"])) == 1  # no time, no trace name


def test_unmappable_records_are_skipped_and_counted():
    api = FakeApi(
        [[obs(1), {**obs(2), "traceId": None}]], [[score(1, {"kind": "session", "id": "x"})]]
    )
    batch = LangfuseTraceSource(TraceSettings(), api=api).fetch(None, 10)
    assert [t.id for t in batch.traces] == ["o1"]
    assert batch.annotations == []
    assert [(s.file, s.line, s.field) for s in batch.skipped] == [
        ("langfuse:observations", 2, "traceId"),
        ("langfuse:scores", 1, "subject.kind"),
    ]


def test_api_errors_become_one_clear_sentence():
    class Failing:
        def get_many(self, **params):
            raise ApiError(status_code=401, headers={}, body="unauthorized")

    api = FakeApi([], [])
    api.observations = Failing()
    with pytest.raises(TraceSourceError, match=r"\(401\).*LANGFUSE_HOST"):
        LangfuseTraceSource(TraceSettings(), api=api).fetch(None, 10)


def test_missing_keys_name_the_variables_not_their_values(monkeypatch):
    monkeypatch.delenv("LANGFUSE_PUBLIC_KEY", raising=False)
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", "sk-lf-do-not-print")
    with pytest.raises(TraceSourceError) as err:
        LangfuseTraceSource(TraceSettings())
    assert "LANGFUSE_PUBLIC_KEY" in str(err.value)
    assert "sk-lf-do-not-print" not in str(err.value)
