"""The OpenAI-compatible server over the real local model."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from infra.lm.local import LocalLM
from infra.lm.server import create_app
from infra.settings import LMSettings

pytestmark = pytest.mark.slow

ASK = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def client():
    lm = LocalLM(LMSettings(batch_wait_ms=2))
    with TestClient(create_app(lm, "base")) as test_client:
        yield test_client
    lm.close()


def test_models(client):
    assert [m["id"] for m in client.get("/v1/models").json()["data"]] == ["base"]


def test_chat_completion_with_logprobs(client):
    body = {"model": "base", "messages": ASK, "max_tokens": 4, "temperature": 0}
    body |= {"logprobs": True, "top_logprobs": 3}
    reply = client.post("/v1/chat/completions", json=body).json()
    choice = reply["choices"][0]
    assert choice["message"]["role"] == "assistant" and choice["message"]["content"]
    assert choice["finish_reason"] == "length"
    assert reply["usage"]["completion_tokens"] == 4
    assert reply["usage"]["total_tokens"] == reply["usage"]["prompt_tokens"] + 4
    tokens = choice["logprobs"]["content"]
    assert "".join(t["token"] for t in tokens) == choice["message"]["content"]
    first = tokens[0]
    assert len(first["top_logprobs"]) == 3
    assert first["top_logprobs"][0]["logprob"] == pytest.approx(first["logprob"])


def test_stop_and_bad_requests(client):
    body = {"model": "base", "messages": ASK, "max_tokens": 16, "temperature": 0, "stop": "Paris"}
    reply = client.post("/v1/chat/completions", json=body).json()
    assert "Paris" not in reply["choices"][0]["message"]["content"]
    assert reply["choices"][0]["logprobs"] is None
    assert client.post("/v1/chat/completions", json=body | {"n": 2}).status_code == 400
    assert client.post("/v1/chat/completions", json=body | {"model": "nope"}).status_code == 404
    assert client.post("/v1/chat/completions", json=body | {"messages": []}).status_code == 422
