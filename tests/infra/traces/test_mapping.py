from datetime import UTC, datetime

import pytest

from infra.traces.errors import RecordError
from infra.traces.mapping import annotation_from_score, trace_from_observation


def observation(**overrides):
    obs = {
        "id": "obs-1",
        "traceId": "tr-1",
        "name": "route",
        "startTime": "2025-03-01T10:00:00.000Z",
        "input": [
            {"role": "system", "content": "Route the request."},
            {"role": "user", "content": "I lost my card"},
        ],
        "output": {"role": "assistant", "content": "lost_or_stolen_card"},
        "promptName": "router",
        "promptVersion": 3,
        "tags": ["prod"],
        "metadata": {"intent": "lost_or_stolen_card"},
    }
    obs.update(overrides)
    return obs


def score(**overrides):
    base = {
        "id": "sc-1",
        "projectId": "p",
        "name": "correct",
        "dataType": "BOOLEAN",
        "value": True,
        "source": "ANNOTATION",
        "timestamp": "2025-03-02T09:00:00Z",
        "environment": "default",
        "subject": {"kind": "observation", "id": "obs-1", "traceId": "tr-1"},
    }
    base.update(overrides)
    return base


def test_observation_fields_and_chat_accessors():
    trace = trace_from_observation(observation())
    assert (trace.id, trace.trace_id, trace.name) == ("obs-1", "tr-1", "route")
    assert trace.start_time == datetime(2025, 3, 1, 10, tzinfo=UTC)
    assert (trace.prompt_name, trace.prompt_version, trace.tags) == ("router", 3, ("prod",))
    assert trace.metadata == {"intent": "lost_or_stolen_card"}
    assert [m["role"] for m in trace.messages] == ["system", "user"]
    assert trace.user_text == "I lost my card"
    assert trace.output_text == "lost_or_stolen_card"
    assert hash(trace) == hash(trace_from_observation(observation()))


@pytest.mark.parametrize(
    "raw, user_text",
    [
        ('[{"role": "user", "content": "hi"}]', "hi"),  # the v2 API returns JSON as a string
        ("plain question", "plain question"),
        ({"question": "what is my balance"}, "what is my balance"),
        ({"messages": [{"role": "user", "content": [{"type": "text", "text": "parts"}]}]}, "parts"),
        (None, ""),
    ],
)
def test_input_kept_as_given_and_read_in_every_shape(raw, user_text):
    trace = trace_from_observation(observation(input=raw))
    assert trace.input == raw
    assert trace.user_text == user_text


def test_output_text_from_a_json_string_or_plain_text():
    assert trace_from_observation(observation(output="card_arrival")).output_text == "card_arrival"
    encoded = '{"role": "assistant", "content": "refund"}'
    assert trace_from_observation(observation(output=encoded)).output_text == "refund"


def test_datetime_objects_and_naive_times_become_utc():
    naive = trace_from_observation(observation(startTime="2025-03-01T10:00:00"))
    assert naive.start_time.tzinfo is UTC
    obj = trace_from_observation(observation(startTime=datetime(2025, 3, 1, tzinfo=UTC)))
    assert obj.start_time == datetime(2025, 3, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"traceId": None}, "traceId"),
        ({"id": 7}, "id"),
        ({"startTime": "yesterday"}, "startTime"),
        ({"promptVersion": "3"}, "promptVersion"),
        ({"promptVersion": True}, "promptVersion"),
        ({"tags": "prod"}, "tags"),
        ({"metadata": []}, "metadata"),
    ],
)
def test_bad_observation_names_the_field(overrides, field):
    with pytest.raises(RecordError) as err:
        trace_from_observation(observation(**overrides))
    assert err.value.field == field


def test_v3_boolean_score_on_an_observation():
    ann = annotation_from_score(score(comment="right intent", metadata={"by": "ops"}))
    assert (ann.trace_id, ann.observation_id) == ("tr-1", "obs-1")
    assert (ann.value, ann.data_type, ann.is_human) == (1.0, "BOOLEAN", True)
    assert ann.comment == "right intent" and ann.metadata == {"by": "ops"}
    assert ann.timestamp == datetime(2025, 3, 2, 9, tzinfo=UTC)


def test_v3_trace_subject_and_categorical_value():
    ann = annotation_from_score(
        score(dataType="CATEGORICAL", value="wrong_intent", subject={"kind": "trace", "id": "t9"})
    )
    assert (ann.trace_id, ann.observation_id, ann.value) == ("t9", None, "wrong_intent")


def test_flat_export_shape():
    flat = {
        "id": "sc-2",
        "traceId": "tr-2",
        "observationId": None,
        "name": "correct",
        "value": 0,
        "stringValue": "False",
        "dataType": "BOOLEAN",
        "source": "EVAL",
        "createdAt": "2025-03-02T09:00:00Z",
    }
    ann = annotation_from_score(flat)
    assert (ann.trace_id, ann.value, ann.is_human) == ("tr-2", 0.0, False)
    categorical = annotation_from_score(
        {**flat, "dataType": "CATEGORICAL", "value": 2, "stringValue": "refund"}
    )
    assert categorical.value == "refund"


@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"dataType": "TEXT"}, "dataType"),
        ({"source": "HUMAN"}, "source"),
        ({"dataType": "NUMERIC", "value": "high"}, "value"),
        ({"dataType": "BOOLEAN", "value": 0.5}, "value"),
        ({"subject": {"kind": "experiment", "id": "e1"}}, "subject.kind"),
        ({"subject": {"kind": "observation", "id": "o1"}}, "subject.traceId"),
        ({"subject": None}, "traceId"),
        ({"timestamp": None, "createdAt": None}, "createdAt"),
        ({"name": ""}, "name"),
    ],
)
def test_bad_score_names_the_field(overrides, field):
    with pytest.raises(RecordError) as err:
        annotation_from_score(score(**overrides))
    assert err.value.field == field


def test_non_object_record():
    with pytest.raises(RecordError) as err:
        trace_from_observation(["not", "an", "object"])
    assert err.value.field == "<record>"
