"""LangfuseTraceSource against a fake of the SDK's `api` object.

Pages and responses are built the way the SDK builds them: `parse_obj_as` on the
server's camelCase JSON into the SDK's own response models.
"""

import json
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from langfuse.api import ScoreConfigs
from langfuse.api.annotation_queues import (
    AnnotationQueueObjectType,
    AnnotationQueueStatus,
    PaginatedAnnotationQueueItems,
    PaginatedAnnotationQueues,
)
from langfuse.api.core.api_error import ApiError
from langfuse.api.core.pydantic_utilities import parse_obj_as
from langfuse.api.observations.types.observations_v2response import ObservationsV2Response
from langfuse.api.scores import CreateScoreRequest, CreateScoresResponse
from langfuse.api.scores.types.get_scores_v3response import GetScoresV3Response

from infra.errors import UserFacingError
from infra.scales import ScaleError, ScoreScale
from infra.settings import TraceSettings
from infra.traces import JudgeScore, LabelRequest
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


class FakeScores(FakeListing):
    """The scores endpoint: corrected outputs (dataType CORRECTION) are their own listing."""

    def __init__(self, pages, correction_pages):
        super().__init__(GetScoresV3Response, pages, {"limit": 100})
        self.corrections = FakeListing(GetScoresV3Response, correction_pages, {"limit": 100})

    def get_many(self, **params):
        if params.get("data_type") == "CORRECTION":
            return self.corrections.get_many(**params)
        return super().get_many(**params)


class FakeApi:
    def __init__(self, observation_pages, score_pages, correction_pages=([],)):
        self.observations = FakeListing(ObservationsV2Response, observation_pages, {})
        self.scores = FakeScores(score_pages, list(correction_pages))


def correction(i: int, text: str, trace: int | None = None) -> dict:
    """A corrected output in the v3 API's shape: the text is the value."""
    return {
        **score(i),
        "id": f"c{i}",
        "name": "output",
        "dataType": "CORRECTION",
        "value": text,
        "subject": {"kind": "trace", "id": f"t{trace or i}"},
    }


def test_corrected_outputs_come_with_their_traces():
    api = FakeApi(
        [[obs(1), obs(2)]],
        [[score(1)]],
        [[correction(1, "Refund sent."), correction(7, "Not ours."), correction(2, " ")]],
    )
    batch = LangfuseTraceSource(TraceSettings(), api=api).fetch(SINCE, 10)
    assert [(c.trace_id, c.text) for c in batch.corrections] == [("t1", "Refund sent.")]
    assert [s.field for s in batch.skipped] == ["value"]  # the blank one, named
    asked = api.scores.corrections.calls[0]
    assert asked["data_type"] == "CORRECTION" and asked["from_timestamp"] == SINCE


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
    assert first["cursor"] is None
    assert first["fields"] == "basic,io,metadata,model,prompt,trace_context"
    conditions = json.loads(first["filter"])
    assert {
        "type": "stringOptions",
        "column": "type",
        "operator": "any of",
        "value": ["GENERATION", "TOOL"],
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
        [[obs(1), {**obs(2), "traceId": None}]], [[score(1, {"kind": "experiment", "id": "x"})]]
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


# Label requests and judge scores back to Langfuse

QUEUE = {
    "scoreConfigIds": [],
    "createdAt": "2026-11-01T00:00:00Z",
    "updatedAt": "2026-11-01T00:00:00Z",
}


def numbered_pages(model, pages: list[list[dict]]) -> list:
    """Pages of a page-numbered listing, as the SDK parses them."""
    return [
        parse_obj_as(
            model,
            {
                "data": page,
                "meta": {"page": n + 1, "limit": 100, "totalItems": 0, "totalPages": len(pages)},
            },
        )
        for n, page in enumerate(pages)
    ]


class FakeQueues:
    """`api.annotation_queues`: pages of queues, and the items created."""

    def __init__(self, pages: list[list[dict]]):
        self.listed: list[int] = []
        self.items: list[tuple] = []
        self._pages = numbered_pages(
            PaginatedAnnotationQueues, [[QUEUE | q for q in page] for page in pages]
        )

    def list_queues(self, *, page=None, limit=None):
        self.listed.append(page)
        return self._pages[page - 1]

    def create_queue_item(self, queue_id, *, object_id, object_type, status=None):
        self.items.append((queue_id, object_id, object_type))

    def list_queue_items(self, queue_id, *, status=None, page=None, limit=None):
        """Two pages of the items created so far, as Langfuse lists them (all pending)."""
        assert status == AnnotationQueueStatus.PENDING
        rows = [
            {
                "id": f"i{n}",
                "queueId": queue,
                "objectId": obj,
                "objectType": kind.value,
                "status": "PENDING",
                "createdAt": "2026-11-30T03:00:00Z",
                "updatedAt": "2026-11-30T03:00:00Z",
            }
            for n, (queue, obj, kind) in enumerate(self.items)
            if queue == queue_id
        ]
        half = (len(rows) + 1) // 2
        return parse_obj_as(
            PaginatedAnnotationQueueItems,
            {
                "data": rows[:half] if page == 1 else rows[half:],
                "meta": {"page": page, "limit": 100, "totalItems": len(rows), "totalPages": 2},
            },
        )


class FakeScoreWriter:
    """`api.scores.create`: records each batch, answers 202 or the 207 it is given."""

    def __init__(self, response: dict | None = None):
        self.batches: list[list] = []
        self.response = parse_obj_as(CreateScoresResponse, response or {"message": "Accepted"})

    def create(self, *, request):
        self.batches.append(request)
        return self.response


def feedback_api(queues=None, scores=None, configs=None) -> SimpleNamespace:
    configs = configs or FakeScoreConfigs([[]])  # a project without score configs
    return SimpleNamespace(annotation_queues=queues, scores=scores, score_configs=configs)


def judge_score(i: int, value: float = 1.0) -> JudgeScore:
    return JudgeScore(
        id=f"js{i}",
        trace_id=f"t{i}",
        name="flywheel_judge",
        value=value,
        timestamp=SINCE,
        comment=f"why {i}",
        metadata={"judge_version": "agent-judge-rubric v2", "threshold": 0.4, "p_pass": 0.7},
    )


def label_request(i: int) -> LabelRequest:
    return LabelRequest(f"t{i}", "judge least sure", 0.01 * i, "agent-judge-rubric v2")


def test_label_requests_become_trace_items_of_the_named_queue():
    queues = FakeQueues([[{"id": "q1", "name": "other"}], [{"id": "q2", "name": "judge-review"}]])
    source = LangfuseTraceSource(
        TraceSettings(annotation_queue="judge-review"), api=feedback_api(queues)
    )
    assert source.request_labels([label_request(1), label_request(2)]) == 2
    assert source.request_labels([label_request(3)]) == 1
    assert queues.items == [
        ("q2", "t1", AnnotationQueueObjectType.TRACE),
        ("q2", "t2", AnnotationQueueObjectType.TRACE),
        ("q2", "t3", AnnotationQueueObjectType.TRACE),
    ]
    assert queues.listed == [1, 2]  # the queue is looked up once, through every page
    # the next night reads the pending items back, through both pages, and skips them
    queues.items.append(("q2", "obs-9", AnnotationQueueObjectType.OBSERVATION))
    assert source.pending_label_requests() == {"t1", "t2", "t3"}
    assert (
        LangfuseTraceSource(TraceSettings(), api=feedback_api(queues)).pending_label_requests()
        == set()
    )


def test_a_queue_id_works_too_and_a_missing_queue_is_one_sentence():
    queues = FakeQueues([[{"id": "q1", "name": "judge-review"}]])
    source = LangfuseTraceSource(TraceSettings(annotation_queue="q1"), api=feedback_api(queues))
    assert source.request_labels([label_request(1)]) == 1 and queues.items[0][0] == "q1"

    unknown = LangfuseTraceSource(
        TraceSettings(annotation_queue="nope"), api=feedback_api(FakeQueues([[]]))
    )
    with pytest.raises(TraceSourceError, match="no annotation queue.*'nope'.*ANNOTATION_QUEUE"):
        unknown.request_labels([label_request(1)])
    unset = LangfuseTraceSource(TraceSettings(), api=feedback_api(queues))
    with pytest.raises(TraceSourceError, match="FLYWHEEL_TRACES__ANNOTATION_QUEUE"):
        unset.request_labels([label_request(1)])
    assert unset.request_labels([]) == 0  # nothing to ask: no queue needed


def test_judge_scores_go_out_in_batches_as_api_scores():
    writer = FakeScoreWriter()
    source = LangfuseTraceSource(TraceSettings(), api=feedback_api(scores=writer))
    scores = [judge_score(i, value=float(i % 2)) for i in range(150)]
    assert source.write_scores(scores) == 150
    assert [len(b) for b in writer.batches] == [100, 50]
    first = writer.batches[0][1]
    assert isinstance(first, CreateScoreRequest)
    assert (first.id, first.trace_id, first.name, first.value) == (
        "js1",
        "t1",
        "flywheel_judge",
        1.0,
    )
    assert first.data_type == "BOOLEAN" and first.comment == "why 1" and first.timestamp == SINCE
    assert first.metadata["judge_version"] == "agent-judge-rubric v2"
    assert first.source is None  # Langfuse records API; it refuses EVAL on this endpoint
    assert source.write_scores([]) == 0 and len(writer.batches) == 2


def test_judge_scores_of_other_kinds_go_out_with_langfuses_data_type():
    writer = FakeScoreWriter()
    source = LangfuseTraceSource(TraceSettings(), api=feedback_api(scores=writer))
    scores = [
        JudgeScore("c1", "t1", "tone", "polite", SINCE, kind="categorical"),
        JudgeScore("n2", "t2", "stars", 4.5, SINCE, kind="numeric"),
    ]
    assert source.write_scores(scores) == 2
    sent = writer.batches[0]
    assert [(r.data_type, r.value) for r in sent] == [("CATEGORICAL", "polite"), ("NUMERIC", 4.5)]


def test_scores_langfuse_partly_rejects_are_counted_not_resent(caplog):
    writer = FakeScoreWriter(
        {"accepted": 1, "rejected": 1, "errors": [{"message": "trace t2 not found"}]}
    )
    source = LangfuseTraceSource(TraceSettings(), api=feedback_api(scores=writer))
    assert source.write_scores([judge_score(1), judge_score(2)]) == 1
    assert len(writer.batches) == 1 and "trace t2 not found" in caplog.text


def test_write_errors_are_one_sentence_without_the_keys(monkeypatch, caplog):
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", "pk-lf-do-not-print")
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", "sk-lf-do-not-print")

    class Refusing:
        def create(self, *, request):
            raise ApiError(
                status_code=403, headers={"authorization": "sk-lf-do-not-print"}, body=""
            )

        def create_queue_item(self, queue_id, **params):
            self.create(request=None)

        def list_queues(self, **params):
            self.create(request=None)

    api = feedback_api(queues=Refusing(), scores=Refusing())
    source = LangfuseTraceSource(TraceSettings(annotation_queue="q"), api=api)
    for call, items in (
        (source.write_scores, [judge_score(1)]),
        (source.request_labels, [label_request(1)]),
    ):
        with pytest.raises(TraceSourceError, match=r"\(403\)") as err:
            call(items)
        assert "do-not-print" not in str(err.value)
    with pytest.raises(TraceSourceError, match=r"did not list the annotation queue \(403\)"):
        source.pending_label_requests()
    assert "do-not-print" not in caplog.text


# The annotation's score config


def config(name: str, archived: bool = False, created: str = "2026-11-01", **shape) -> dict:
    return {
        "id": f"c-{name}-{created}",
        "name": name,
        "projectId": "p",
        "dataType": "NUMERIC",
        "isArchived": archived,
        "createdAt": f"{created}T00:00:00Z",
        "updatedAt": f"{created}T00:00:00Z",
        **shape,
    }


class FakeScoreConfigs:
    """`api.score_configs.get`: numbered pages of configs, each request recorded."""

    def __init__(self, pages: list[list[dict]]):
        self.asked: list[tuple] = []
        self._pages = numbered_pages(ScoreConfigs, pages)

    def get(self, *, page=None, limit=None, request_options=None):
        self.asked.append((page, limit))
        return self._pages[page - 1]


def test_the_score_config_is_found_by_name_through_every_page():
    categories = [{"label": "bad", "value": 0}, {"label": "good", "value": 1}]
    configs = FakeScoreConfigs(
        [
            [config("speed", minValue=1, maxValue=5)],
            [
                config("quality", archived=True, created="2026-10-01", minValue=0, maxValue=9),
                config("quality", dataType="CATEGORICAL", categories=categories),
            ],
        ]
    )
    source = LangfuseTraceSource(TraceSettings(), api=SimpleNamespace(score_configs=configs))
    found = source.score_scale("quality")  # the archived older one is passed over
    assert found == ScoreScale("categorical", ("bad", "good"), (0.0, 1.0), name="quality")
    assert configs.asked == [(1, 100), (2, 100)]
    assert source.score_scale("quality", ordinal=True).ordinal
    assert source.score_scale("speed") == ScoreScale("numeric", minimum=1, maximum=5, name="speed")
    assert source.score_scale("missing") is None


def test_a_score_config_that_is_no_scale_is_one_sentence_naming_it():
    unranged = config("stars", minValue=5, maxValue=1)
    source = LangfuseTraceSource(
        TraceSettings(), api=SimpleNamespace(score_configs=FakeScoreConfigs([[unranged]]))
    )
    with pytest.raises(UserFacingError) as caught:
        source.score_scale("stars")
    assert str(caught.value).startswith(
        "The Langfuse score config 'stars' cannot be read (maximum: 1.0 is below the minimum "
        "5.0): fix it in the project's score configs"
    )
    assert isinstance(caught.value.__cause__, ScaleError)


def test_score_config_errors_are_one_sentence():
    class Refusing:
        def get(self, **params):
            raise ApiError(status_code=401, headers={"authorization": "sk-lf-secret"}, body="")

    source = LangfuseTraceSource(TraceSettings(), api=SimpleNamespace(score_configs=Refusing()))
    with pytest.raises(TraceSourceError, match=r"did not list the score configs \(401\)") as err:
        source.score_scale("quality")
    assert "sk-lf-secret" not in str(err.value)


# Production traffic only, and listings that cannot run away


def test_environment_and_tags_select_traces_and_scores_read_only_the_annotation():
    api = FakeApi([[{**obs(1), "environment": "production"}, obs(2)]], [[score(1)]])
    settings = TraceSettings(environment="production", tags=["prod", "eu"])
    LangfuseTraceSource(settings, api=api).fetch(None, 10)
    conditions = json.loads(api.observations.calls[0]["filter"])
    assert {
        "type": "string",
        "column": "environment",
        "operator": "=",
        "value": "production",
    } in conditions
    assert {
        "type": "arrayOptions",
        "column": "traceTags",
        "operator": "all of",
        "value": ["prod", "eu"],
    } in conditions
    scores_call = api.scores.calls[0]
    assert scores_call["environment"] == "production" and scores_call["name"] == "correct"
    plain = FakeApi([[obs(1)]], [[score(1)]])
    LangfuseTraceSource(TraceSettings(), api=plain).fetch(None, 10)
    assert "environment" not in plain.scores.calls[0]
    assert len(json.loads(plain.observations.calls[0]["filter"])) == 1


def test_judge_scores_go_to_their_trace_s_environment_under_the_score_config():
    writer = FakeScoreWriter()
    configs = FakeScoreConfigs(
        [[config("flywheel_judge", archived=True, created="2026-10-01"), config("flywheel_judge")]]
    )
    api = FakeApi([[{**obs(1), "environment": "staging"}, obs(2)]], [[]])
    writer.get_many = api.scores.get_many  # one scores endpoint: it lists and it writes
    api.scores, api.score_configs = writer, configs
    source = LangfuseTraceSource(TraceSettings(environment="production"), api=api)
    source.fetch(None, 10)
    source.write_scores([judge_score(1), judge_score(2)])
    sent = {r.trace_id: (r.environment, r.config_id) for r in writer.batches[0]}
    # t1 was read in staging; t2 has none recorded: the configured environment
    assert sent == {
        "t1": ("staging", "c-flywheel_judge-2026-11-01"),
        "t2": ("production", "c-flywheel_judge-2026-11-01"),
    }


def test_a_repeated_cursor_stops_the_listing_with_a_sentence():
    class Looping:
        calls = 0

        def get_many(self, **params):
            Looping.calls += 1
            return parse_obj_as(ObservationsV2Response, {"data": [obs(1)], "meta": {"cursor": "c"}})

    api = FakeApi([], [])
    api.observations = Looping()
    with pytest.raises(TraceSourceError, match="same page cursor twice"):
        LangfuseTraceSource(TraceSettings(), api=api).fetch(None, 10_000)
    assert Looping.calls == 2


def test_a_listing_that_reports_more_pages_than_it_has_stops_at_the_first_empty_one():
    page = {"page": 1, "limit": 100, "totalItems": 969_300, "totalPages": 9_693}
    listing = [parse_obj_as(ScoreConfigs, {"data": [config("speed")], "meta": page})]
    listing.append(parse_obj_as(ScoreConfigs, {"data": [], "meta": {**page, "page": 2}}))
    asked = []

    def get(*, page=None, limit=None, request_options=None):
        asked.append(page)
        return listing[min(page, 2) - 1]

    source = LangfuseTraceSource(
        TraceSettings(), api=SimpleNamespace(score_configs=SimpleNamespace(get=get))
    )
    assert source.score_scale("quality") is None
    assert asked == [1, 2]


def test_a_page_of_the_wrong_shape_is_one_sentence_naming_the_field():
    class Malformed:
        def get_many(self, **params):
            bad = {**obs(1), "startTime": {"not": "a time"}}
            return parse_obj_as(ObservationsV2Response, {"data": [bad], "meta": {}})

    api = FakeApi([], [])
    api.observations = Malformed()
    with pytest.raises(TraceSourceError, match=r"did not have the shape.*field") as err:
        LangfuseTraceSource(TraceSettings(), api=api).fetch(None, 10)
    assert "Traceback" not in str(err.value)
