"""The Langfuse fakes the tests run on answer what the SDK's own models describe, and
are asked what the SDK's client methods take.

The SDK parses every response with `parse_obj_as` into pydantic models that allow
unknown keys, so a fake with a misspelled key ("totalPage", "promtName") would parse and
hand the code under test a default instead of the value: the fake would agree with the
code rather than with Langfuse. Here each fake response is parsed by the SDK's model and
then walked for keys the model does not know. The other way, a fake would take a keyword
or a value the SDK refuses: `Checked` holds each call to the SDK method's signature and
annotated types first.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from langfuse.api import CreateChatPromptRequest, CreateTextPromptRequest, NotFoundError
from langfuse.api.annotation_queues import AnnotationQueueObjectType, AnnotationQueueStatus
from langfuse.api.annotation_queues.client import AnnotationQueuesClient
from langfuse.api.core.pydantic_utilities import parse_obj_as
from langfuse.api.observations.client import ObservationsClient
from langfuse.api.observations.types.observations_v2response import ObservationsV2Response
from langfuse.api.score_configs.client import ScoreConfigsClient
from langfuse.api.scores.client import ScoresClient
from pydantic import BaseModel, TypeAdapter, ValidationError

from infra.settings import TraceSettings
from infra.traces.langfuse_source import LangfuseTraceSource
from tests.fake_langfuse_prompts import PROJECT, FakeLangfusePrompts
from tests.infra.traces.test_langfuse import (
    FakeApi,
    FakeQueues,
    FakeScoreConfigs,
    FakeScoreWriter,
    config,
    correction,
    feedback_api,
    judge_score,
    label_request,
    obs,
    score,
)


def unknown_keys(value: object, path: str = "$") -> list[str]:
    """Where a parsed response holds keys its SDK model does not declare."""
    if isinstance(value, BaseModel):
        found = [f"{path}.{key}" for key in value.model_extra or {}]
        for name in type(value).model_fields:
            found += unknown_keys(getattr(value, name), f"{path}.{name}")
        return found
    if isinstance(value, list | tuple):
        return [key for n, item in enumerate(value) for key in unknown_keys(item, f"{path}[{n}]")]
    return []


def test_a_misspelled_key_parses_but_is_found():
    body = {"data": [obs(1) | {"promtName": "router"}], "meta": {"curser": "2"}}
    parsed = parse_obj_as(ObservationsV2Response, body)  # the SDK takes it silently
    assert unknown_keys(parsed) == ["$.data[0].promtName", "$.meta.curser"]


def test_the_trace_listings_are_pages_of_the_sdk_s_models():
    observation_on_trace = {"kind": "observation", "id": "o3", "traceId": "t3"}
    api = FakeApi(
        [[obs(1), obs(2)], [obs(3)]],
        [[score(1), score(2)], [score(3, observation_on_trace)]],
        [[correction(1, "Refund sent.")]],
    )
    pages = [
        api.observations.get_many(cursor=None),
        api.observations.get_many(cursor="1"),
        api.scores.get_many(cursor=None),
        api.scores.get_many(cursor="1"),
        api.scores.get_many(cursor=None, data_type="CORRECTION"),
    ]
    for page in pages:
        assert page.data
        assert unknown_keys(page) == []
    assert [page.meta.cursor for page in pages] == ["1", None, "1", None, None]
    assert pages[3].data[0].subject.trace_id == "t3"


def test_score_configs_and_annotation_queues_are_numbered_pages_of_the_sdk_s_models():
    categories = [{"label": "bad", "value": 0}, {"label": "good", "value": 1}]
    configs = FakeScoreConfigs(
        [
            [config("speed", minValue=1, maxValue=5)],
            [config("quality", dataType="CATEGORICAL", categories=categories)],
        ]
    )
    queues = FakeQueues([[{"id": "q1", "name": "judge-review"}]])
    for trace in ("t1", "t2", "t3"):
        queues.create_queue_item("q1", object_id=trace, object_type=AnnotationQueueObjectType.TRACE)
    pending = AnnotationQueueStatus.PENDING
    pages = [
        configs.get(page=1),
        configs.get(page=2),
        queues.list_queues(page=1),
        queues.list_queue_items("q1", status=pending, page=1),
        queues.list_queue_items("q1", status=pending, page=2),
    ]
    for page in pages:
        assert page.data
        assert unknown_keys(page) == []
    assert [(page.meta.page, page.meta.total_pages) for page in pages] == [
        (1, 2),
        (2, 2),
        (1, 1),
        (1, 2),
        (2, 2),
    ]
    assert pages[3].meta.total_items == 3


def test_the_score_writer_answers_like_the_sdk_s_202_and_207():
    accepted = FakeScoreWriter().response
    partly = FakeScoreWriter(
        {"accepted": 1, "rejected": 1, "errors": [{"message": "trace t2 not found"}]}
    ).response
    assert type(accepted).__name__ == "CreateScoreBatchResponse"
    assert type(partly).__name__ == "CreateScoreBatchResults"
    assert unknown_keys(accepted) == unknown_keys(partly) == []


@pytest.fixture
def sdk():
    """The SDK's API client against the HTTP fake of the prompts API."""
    with FakeLangfusePrompts() as fake:
        yield fake.sdk_api()


def test_the_prompts_fake_answers_the_sdk_with_its_models(sdk):
    text = CreateTextPromptRequest(
        type="text",
        name="router",
        prompt="Route it.",
        config={"model": "m"},
        labels=["production"],
        tags=["agent"],
        commit_message="seed",
    )
    created = sdk.prompts.create(request=text)
    chat = CreateChatPromptRequest(
        type="chat", name="writer", prompt=[{"role": "system", "content": "Write."}], labels=[]
    )
    answers = [
        created,
        sdk.prompts.create(request=chat),
        sdk.prompts.get("router", label="production"),
        sdk.prompts.get("router", version=1),
        sdk.prompt_version.update("router", 1, new_labels=["candidate"]),
        sdk.projects.get(),
    ]
    for answer in answers:
        assert unknown_keys(answer) == []
    assert (created.type, created.commit_message, created.labels) == (
        "text",
        "seed",
        ["production", "latest"],
    )
    assert answers[1].type == "chat" and answers[1].prompt[0].content == "Write."
    assert answers[4].labels == ["candidate", "latest"]
    assert answers[5].data[0].id == PROJECT["id"]


def test_the_prompts_fake_s_not_found_is_the_sdk_s_not_found_error(sdk):
    with pytest.raises(NotFoundError) as missing:
        sdk.prompts.get("nobody", label="production")
    assert missing.value.status_code == 404
    assert missing.value.body == {"message": "Prompt not found: nobody"}


def sdk_accepts(method: Callable, *args: object, **kwargs: object) -> None:
    """Raises unless the SDK client's `method` takes these arguments: parameters it
    declares, values of the types it annotates (strictly: no coercion)."""
    bound = inspect.signature(method).bind(None, *args, **kwargs)  # None: the client
    hints = typing.get_type_hints(method)
    for name, value in bound.arguments.items():
        if name in hints:
            TypeAdapter(hints[name]).validate_python(value, strict=True)


class Checked:
    """A fake whose every call is first held to the SDK client's method of that name."""

    def __init__(self, fake: object, client: type):
        self._fake, self._client = fake, client

    def __getattr__(self, name: str) -> Callable:
        method, fake = getattr(self._client, name), getattr(self._fake, name)

        def call(*args, **kwargs):
            sdk_accepts(method, *args, **kwargs)
            return fake(*args, **kwargs)

        return call


def test_a_call_the_sdk_would_refuse_is_caught():
    with pytest.raises(TypeError, match="cursorr"):
        sdk_accepts(ObservationsClient.get_many, cursorr="1")
    with pytest.raises(ValidationError):  # a string where the SDK wants a datetime
        sdk_accepts(ScoresClient.get_many, from_timestamp="2025-03-01T00:00:00Z")
    sdk_accepts(ScoresClient.get_many, from_timestamp=datetime(2025, 3, 1, tzinfo=UTC))


def test_reading_traces_asks_only_what_the_sdk_takes():
    api = FakeApi(
        [[obs(1), obs(2)], [obs(3)]], [[score(1), score(2)], [score(3)]], [[correction(1, "x")]]
    )
    api.observations = Checked(api.observations, ObservationsClient)
    api.scores = Checked(api.scores, ScoresClient)
    since = datetime(2025, 3, 1, tzinfo=UTC)
    batch = LangfuseTraceSource(TraceSettings(trace_name="support"), api=api).fetch(since, 10)
    assert len(batch.traces) == 3 and len(batch.corrections) == 1


def test_writing_scores_and_label_requests_asks_only_what_the_sdk_takes():
    queues = FakeQueues([[{"id": "q1", "name": "judge-review"}]])
    writer = FakeScoreWriter()
    configs = FakeScoreConfigs([[config("flywheel_judge", minValue=0, maxValue=1)]])
    api = feedback_api(
        Checked(queues, AnnotationQueuesClient),
        Checked(writer, ScoresClient),
        Checked(configs, ScoreConfigsClient),
    )
    source = LangfuseTraceSource(TraceSettings(annotation_queue="judge-review"), api=api)
    assert source.write_scores([judge_score(1), judge_score(2)]) == 2
    assert source.request_labels([label_request(1)]) == 1
    assert source.pending_label_requests() == {"t1"}
    assert source.score_scale("flywheel_judge") is not None
    assert writer.batches[0][0].config_id == "c-flywheel_judge-2026-11-01"
