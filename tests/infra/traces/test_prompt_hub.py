"""Langfuse prompt management through the real SDK, against a local fake of its API."""

import pytest

from infra.settings import TraceSettings
from infra.traces.factory import production_prompts
from infra.traces.prompt_hub import PromptHub
from tests.fake_langfuse_prompts import PROJECT, FakeLangfusePrompts


@pytest.fixture
def fake():
    with FakeLangfusePrompts() as server:
        yield server


def hub(fake, **managed) -> PromptHub:
    api = fake.sdk_api()
    return PromptHub(TraceSettings(managed_prompts=managed), api=api)


def test_production_versions_are_read_and_winners_go_back_as_labelled_versions(fake):
    fake.store.create(
        {"name": "router", "prompt": "Route it.", "labels": ["production"], "config": {"t": 0}}
    )
    prompts = hub(fake, instructions="router", examples="router-examples")
    found = prompts.production()
    assert list(found) == ["instructions"]  # router-examples has no production version yet
    assert (found["instructions"].text, found["instructions"].version) == ("Route it.", 1)

    made = prompts.publish("instructions", "Route it well.", ["candidate"], "agent v3")
    assert (made.version, made.labels) == (2, ("candidate", "latest"))
    assert fake.store.prompts["router"][1]["config"] == {"t": 0}  # like production
    assert fake.store.prompts["router"][1]["commitMessage"] == "agent v3"
    assert prompts.production()["instructions"].version == 1  # a candidate is not production

    prompts.label("router", 2, ["production"])
    assert prompts.production()["instructions"].text == "Route it well."
    assert fake.store.prompts["router"][0]["labels"] == []  # the label moved off v1
    assert fake.store.prompts["router"][1]["labels"] == ["candidate", "latest", "production"]


def test_a_chat_prompt_keeps_its_other_messages(fake):
    chat = [
        {"role": "system", "content": "Route it."},
        {"role": "user", "content": "{{request}}"},
    ]
    fake.store.create({"name": "chat", "type": "chat", "prompt": chat, "labels": ["production"]})
    prompts = hub(fake, instructions="chat")
    assert prompts.production()["instructions"].text == "Route it."
    prompts.publish("instructions", "Route it well.", ["production"], "agent v4")
    stored = fake.store.prompts["chat"][1]
    assert stored["type"] == "chat"
    assert [(m["role"], m["content"]) for m in stored["prompt"]] == [
        ("system", "Route it well."),
        ("user", "{{request}}"),
    ]


def test_a_replayed_agent_reads_and_publishes_the_prompts_its_traces_used(fake):
    """agent = "replay": each component is the Langfuse prompt of the same name, read
    through the real SDK (production versions of the names found on traces) and its
    winners published back as versions of that prompt."""
    chat = [{"role": "system", "content": "Reply."}, {"role": "user", "content": "{{request}}"}]
    fake.store.create(
        {"name": "write-reply", "type": "chat", "prompt": chat, "labels": ["production"]}
    )
    fake.store.create(
        {"name": "classify", "prompt": "Kind of {{request}}?", "labels": ["production"]}
    )
    api = hub(fake)._api
    settings = TraceSettings(source="langfuse")
    found = production_prompts(settings, {"write-reply", "classify", "never-made"}, api)
    assert {n: p.text for n, p in found.items()} == {
        "write-reply": "Reply.",
        "classify": "Kind of {{request}}?",
    }
    replayed = PromptHub(settings, api=api, replayed=["write-reply"])
    assert "write-reply" in replayed.names and replayed.names["classify"] == "classify"
    assert list(replayed.production()) == ["write-reply"]  # the night starts from these
    made = replayed.publish("write-reply", "Reply kindly.", ["candidate"], "agent v2")
    assert (made.name, made.version) == ("write-reply", 2)
    assert fake.store.prompts["write-reply"][1]["prompt"][1]["content"] == "{{request}}"


def test_a_version_links_to_its_page_in_the_project_the_keys_belong_to(fake, monkeypatch):
    monkeypatch.setenv("LANGFUSE_HOST", fake.host + "/")
    prompts = hub(fake, instructions="support/router")
    page = prompts.page("support/router", 3)
    assert page == f"{fake.host}/project/{PROJECT['id']}/prompts/support%2Frouter?version=3"
    prompts.page("support/router", 4)
    assert fake.store.requests.count(("GET", "/api/public/projects")) == 1  # asked once


def test_a_server_that_does_not_name_its_project_gives_no_link_and_no_error():
    class NoProjects:
        class projects:  # noqa: N801 - the SDK's attribute
            @staticmethod
            def get():
                raise RuntimeError("403: organization-scoped key")

    prompts = PromptHub(TraceSettings(managed_prompts={"a": "a"}), api=NoProjects())
    assert prompts.page("a", 1) == ""
