"""The OpenAI-compatible server over the real local model."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from infra.lm.engine.local import LocalLM
from infra.lm.engine.server import create_app
from infra.settings import LMSettings
from tests.fakes import random_lora_adapter

pytestmark = pytest.mark.slow

ASK = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def lm():
    local = LocalLM(LMSettings(batch_wait_ms=2))
    yield local
    local.close()


@pytest.fixture(scope="module")
def adapter_dir(lm, tmp_path_factory):
    return random_lora_adapter(lm.base_model_path, tmp_path_factory.mktemp("adapter"))


@pytest.fixture(scope="module")
def client(lm, adapter_dir):
    app = create_app(lm, "base", adapters={"at-start": adapter_dir})
    with TestClient(app) as test_client:
        yield test_client


def test_models_list_adapters_as_vllm_does(client, lm, adapter_dir):
    cards = client.get("/v1/models").json()["data"]
    assert [(c["id"], c["parent"]) for c in cards] == [("base", None), ("at-start", "base")]
    assert cards[0]["root"] == lm.base_model_path
    body = {"lora_name": "night-1", "lora_path": str(adapter_dir)}
    loaded = client.post("/v1/load_lora_adapter", json=body)
    assert loaded.status_code == 200 and loaded.text.startswith("Success")
    cards = client.get("/v1/models").json()["data"]
    assert [c["id"] for c in cards if c["parent"] == "base"] == ["at-start", "night-1"]
    chat = {"model": "night-1", "messages": ASK, "max_tokens": 2, "temperature": 0}
    assert client.post("/v1/chat/completions", json=chat).status_code == 200


def test_load_lora_adapter_refuses_like_vllm(client, adapter_dir, tmp_path):
    body = {"lora_name": "twice", "lora_path": str(adapter_dir)}
    assert client.post("/v1/load_lora_adapter", json=body).status_code == 200
    again = client.post("/v1/load_lora_adapter", json=body)
    assert again.status_code == 400 and "already been loaded" in again.text
    inplace = client.post("/v1/load_lora_adapter", json=body | {"load_inplace": True})
    assert inplace.status_code == 200
    missing = {"lora_name": "missing", "lora_path": str(tmp_path / "nothing")}
    assert client.post("/v1/load_lora_adapter", json=missing).status_code == 400
    base = {"lora_name": "base", "lora_path": str(adapter_dir)}
    assert client.post("/v1/load_lora_adapter", json=base).status_code == 400
    assert client.post("/v1/load_lora_adapter", json={"lora_name": "x"}).status_code == 422


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


def test_unload_lora_adapter_frees_the_name_like_vllm(client, adapter_dir):
    body = {"lora_name": "for-a-while", "lora_path": str(adapter_dir)}
    assert client.post("/v1/load_lora_adapter", json=body).status_code == 200
    gone = client.post("/v1/unload_lora_adapter", json={"lora_name": "for-a-while"})
    assert gone.status_code == 200 and gone.text.startswith("Success")
    cards = client.get("/v1/models").json()["data"]
    assert "for-a-while" not in [c["id"] for c in cards]
    chat = {"model": "for-a-while", "messages": ASK, "max_tokens": 2}
    assert client.post("/v1/chat/completions", json=chat).status_code == 404
    again = client.post("/v1/unload_lora_adapter", json={"lora_name": "for-a-while"})
    assert again.status_code == 404
