"""A two-step voice-assistant agent whose prompts live in Langfuse prompt management.

Step 1 (`classify`) names the kind of request with the TEXT prompt `classify-request`
(variable `{{request}}`, sent as one user message); step 2 (`write_reply`) answers the
user in one sentence with the CHAT prompt `write-reply` (a system message, and a user
message with `{{request}}` and `{{kind}}`). Their seed texts (version 1) are in
prompts.py; traces/ holds a sample of this agent's production traces (build_traces.py).

flywheel optimizes both prompts from the traces with no code of yours: with the setting
`agent = "replay"` it re-runs each trace step by step, rendering a candidate prompt with
the variables the step recorded. Recording them in the generation's metadata
(`metadata={"prompt_variables": ...}`) is what lets it do that; step 2's `kind` is step 1's
output verbatim, so a replay feeds it step 1's new output.

Needs LANGFUSE_PUBLIC_KEY / LANGFUSE_SECRET_KEY / LANGFUSE_HOST and an OpenAI-compatible
model server (OPENAI_BASE_URL, OPENAI_API_KEY). Run: python agent.py "will it rain in Oslo"
"""

from __future__ import annotations

import os
import sys
from functools import cache

from langfuse import get_client, observe
from openai import OpenAI

MODEL = os.environ.get("MODEL", "smollm2-135m-instruct")
CLASSIFY_PARAMS = {"max_tokens": 8, "temperature": 0}
REPLY_PARAMS = {"max_tokens": 40, "temperature": 0}


@cache
def _openai() -> OpenAI:
    return OpenAI(
        base_url=os.environ.get("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1"),
        api_key=os.environ.get("OPENAI_API_KEY", "unused"),
    )


def _chat(messages: list[dict], params: dict) -> str:
    response = _openai().chat.completions.create(model=MODEL, messages=messages, **params)
    return (response.choices[0].message.content or "").strip()


@observe(as_type="generation", name="classify-request")
def classify(request: str) -> str:
    langfuse = get_client()
    prompt = langfuse.get_prompt("classify-request", label="production")
    variables = {"request": request}
    messages = [{"role": "user", "content": prompt.compile(**variables)}]
    kind = _chat(messages, CLASSIFY_PARAMS)
    langfuse.update_current_generation(
        prompt=prompt, model=MODEL, model_parameters=CLASSIFY_PARAMS,
        input=messages, output=kind, metadata={"prompt_variables": variables},
    )  # fmt: skip
    return kind


@observe(as_type="generation", name="write-reply")
def write_reply(request: str, kind: str) -> str:
    langfuse = get_client()
    prompt = langfuse.get_prompt("write-reply", label="production", type="chat")
    variables = {"request": request, "kind": kind}
    messages = prompt.compile(**variables)
    reply = _chat(messages, REPLY_PARAMS)
    langfuse.update_current_generation(
        prompt=prompt, model=MODEL, model_parameters=REPLY_PARAMS,
        input=messages, output=reply, metadata={"prompt_variables": variables},
    )  # fmt: skip
    return reply


@observe(name="handle-request")
def handle(request: str) -> str:
    reply = write_reply(request, classify(request))
    get_client().update_current_span(input={"request": request}, output=reply)
    return reply


if __name__ == "__main__":
    print(handle(" ".join(sys.argv[1:]) or "will it rain in Oslo tomorrow"))
    get_client().flush()
