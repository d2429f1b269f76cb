"""The Langfuse fakes the tests run on answer what the SDK's own models describe.

The SDK parses every response with `parse_obj_as` into pydantic models that allow
unknown keys, so a fake with a misspelled key ("totalPage", "promtName") would parse and
hand the code under test a default instead of the value: the fake would agree with the
code rather than with Langfuse. Here each fake response is parsed by the SDK's model and
then walked for keys the model does not know.
"""

from __future__ import annotations

import pytest
from langfuse import Langfuse
from langfuse.api import CreateChatPromptRequest, CreateTextPromptRequest, NotFoundError
from langfuse.api.annotation_queues import AnnotationQueueObjectType, AnnotationQueueStatus
from langfuse.api.core.pydantic_utilities import parse_obj_as
from langfuse.api.observations.types.observations_v2response import ObservationsV2Response
from pydantic import BaseModel

from tests.fake_langfuse_prompts import PROJECT, FakeLangfusePrompts
from tests.infra.traces.test_langfuse import (
    FakeApi,
    FakeQueues,
    FakeScoreConfigs,
    FakeScoreWriter,
    config,
    correction,
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
        yield Langfuse(
            public_key=f"pk-{fake.host}", secret_key="sk", host=fake.host, tracing_enabled=False
        ).api


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
