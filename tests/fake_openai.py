"""An OpenAI-compatible chat server for tests of the fault machinery, with faults injected
as a flaky proxy in front of a model server would.

Replies are a function of the request body alone (a hash), so two nights see the same
answer to the same request whatever fails around it. Faults are decided per request
body and per sighting of it: the n-th time a body arrives it faults with probability
`fault_share` while n < `faults_per_request`, as one of: HTTP 500, a hang past the
client's timeout, 429 with Retry-After, or a 200 whose JSON is cut short. A body holding
`refuse_marker` is always answered 400 (a request the server turns down for good).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

KINDS = ("server_error", "timeout", "rate_limited", "malformed")
"""Injected faults, named as `infra.lm.calls.FaultKind` counts them."""


def _unit(*parts: object) -> float:
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


class FakeOpenAI:
    def __init__(
        self,
        fault_share: float = 0.0,
        faults_per_request: int = 2,
        refuse_marker: str | None = None,
        hang_s: float = 30.0,
    ) -> None:
        self.fault_share = fault_share
        self.faults_per_request = faults_per_request
        self.refuse_marker = refuse_marker
        self.hang_s = hang_s
        self.requests = 0
        self.injected: Counter[str] = Counter()
        self.hangs_abandoned = 0  # hangs whose client closed the connection
        self.hangs_served = 0  # hangs that ran to their end: the client kept waiting
        self._seen: Counter[str] = Counter()

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def chat(request: Request) -> Response:
            raw = await request.body()
            body = json.loads(raw)
            key = hashlib.sha256(raw).hexdigest()
            sighting = self._seen[key]
            self._seen[key] += 1
            self.requests += 1
            if self.refuse_marker and self.refuse_marker in raw.decode():
                self.injected["refused"] += 1
                return JSONResponse({"error": {"message": "context too long"}}, status_code=400)
            fault = self._fault(key, sighting)
            if fault is not None:
                self.injected[fault] += 1
                return await self._faulty(fault, request, body)
            return JSONResponse(reply(body))

        return app

    def _fault(self, key: str, sighting: int) -> str | None:
        if sighting >= self.faults_per_request or _unit(key, sighting) >= self.fault_share:
            return None
        return KINDS[int(_unit(key, sighting, "kind") * len(KINDS))]

    async def _faulty(self, fault: str, request: Request, body: dict) -> Response:
        if fault == "server_error":
            return JSONResponse({"error": {"message": "upstream failed"}}, status_code=500)
        if fault == "rate_limited":
            headers = {"retry-after": "0.1"}
            return JSONResponse({"error": {"message": "slow down"}}, 429, headers=headers)
        if fault == "malformed":
            cut = json.dumps(reply(body))[:40]
            return Response(cut, media_type="application/json")
        deadline = time.monotonic() + self.hang_s  # a hang: held until the client leaves
        while time.monotonic() < deadline:
            if await request.is_disconnected():
                self.hangs_abandoned += 1
                return Response(status_code=499)
            await asyncio.sleep(0.01)
        self.hangs_served += 1
        return JSONResponse(reply(body))


def reply(body: dict) -> dict:
    """The answer to a request: judge-style Yes/No log-probabilities when asked for the
    top ones, a fenced proposal for a reflection prompt, else a short label."""
    messages = body["messages"]
    h = _unit(messages, body.get("seed"))
    if body.get("top_logprobs"):
        p_yes = 0.05 + 0.9 * h
        top = {"Yes": math.log(p_yes), "No": math.log(1 - p_yes), "Maybe": -9.0}
        text = "Yes" if p_yes >= 0.5 else "No"
        return chat_completion(text, top, body["model"], usage=(10, 2))
    if "```" in messages[-1]["content"]:
        text = f"```\nAnswer with the one best label. Rule {int(h * 9)}.\n```"
        return chat_completion(text, None, body["model"], usage=(10, 2))
    return chat_completion(f"label-{int(h * 7)}", None, body["model"], usage=(10, 2))


def chat_completion(
    text: str, top: dict[str, float] | None, model: str = "m", usage: tuple[int, int] = (5, 1)
) -> dict:
    """An OpenAI chat completion body: `text`, and `top` as its first token's top
    log-probabilities when given."""
    logprobs = None
    if top is not None:
        tops = [{"token": t, "logprob": v, "bytes": None} for t, v in top.items()]
        first = {"token": text, "logprob": top.get(text, -0.1), "bytes": None}
        logprobs = {"content": [first | {"top_logprobs": tops}]}
    return {
        "id": "fake",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
                "logprobs": logprobs,
            }
        ],
        "usage": {
            "prompt_tokens": usage[0],
            "completion_tokens": usage[1],
            "total_tokens": sum(usage),
        },
    }


@contextmanager
def serving(fake: FakeOpenAI) -> Iterator[str]:
    """The fake on a free loopback port in a background thread; yields its base URL."""
    with on_loopback(fake.app()) as url:
        yield url


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def on_loopback(app, port: int | None = None) -> Iterator[str]:
    """An ASGI app served on a loopback port (a free one by default) in a background
    thread; yields its OpenAI-style base URL."""
    port = port or free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
