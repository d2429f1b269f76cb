"""The seed versions (v1) of the two prompts the example agent keeps in Langfuse.

`agent.py` fetches them from Langfuse by name; `build_traces.py` renders these same
texts with the Langfuse SDK's own template compiler to record the sample traces, and
writes them to `traces/prompts.jsonl` in the shape of Langfuse's prompts API.
"""

from __future__ import annotations

CLASSIFY_REQUEST = "classify-request"  # a TEXT prompt, sent as one user message
WRITE_REPLY = "write-reply"  # a CHAT prompt: system + user

KINDS = ("playlist", "restaurant", "weather", "music", "rating", "search", "showtimes")

CLASSIFY_PROMPT = (
    "Classify the request into one of these kinds: playlist, restaurant, weather, music, "
    "rating, search, showtimes.\nAnswer with the kind only.\n\nRequest: {{request}}\nKind:"
)

REPLY_PROMPT = [
    {
        "role": "system",
        "content": "You are a helpful voice assistant. Answer the user in one short sentence.",
    },
    {"role": "user", "content": "{{request}}\n(kind of request: {{kind}})"},
]
