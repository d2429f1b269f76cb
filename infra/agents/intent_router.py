"""The demo agent: route a voice-assistant request (SNIPS) to one of seven intents.

Plain-word labels work far better than CamelCase intent names for a small model, so
the agent speaks plain words and maps them back to the gold intents. Its prompt has two
components the optimizer can rewrite: the system instructions, and example turns
written one per line as `request => label`. The example turns are its demonstrations
(`protocol.Demonstrating`): the night may fill them from labelled traces.
"""

from __future__ import annotations

import re

from infra.lm import LM
from infra.traces.errors import RecordError
from infra.traces.types import TraceRecord
from infra.types import Example, Rollout

LABELS = {
    "AddToPlaylist": "playlist",
    "BookRestaurant": "restaurant",
    "GetWeather": "weather",
    "PlayMusic": "music",
    "RateBook": "rating",
    "SearchCreativeWork": "search",
    "SearchScreeningEvent": "showtimes",
}
_WORD_TO_INTENT = {word: intent for intent, word in LABELS.items()}
_LABEL_RE = re.compile(r"\b(" + "|".join(_WORD_TO_INTENT) + r")\b", re.IGNORECASE)

SEED_PROMPTS = {
    "instructions": (
        "You route requests for a voice assistant. Say which kind of request the user "
        "made: playlist, restaurant, weather, music, rating, search or showtimes."
    ),
    "examples": "what's the forecast for tomorrow in Paris => weather",
}
# What a passing reply is, for this agent: the judge's seed rubric where settings name none.
JUDGE_RUBRIC = (
    "You review replies of an intent router for a voice assistant. Its reply must name "
    "the one kind of request the user made: playlist (add a song to a playlist), restaurant "
    "(book a table), weather, music (play music), rating (rate a book), search (find a book, "
    "film, song or show) or showtimes (movie times). A reply passes when it names the right "
    "kind. It fails when it names no kind, names another kind, or says anything else."
)


def parse_intent(output: str) -> str | None:
    """The gold intent named first in the reply, or None when it names none."""
    match = _LABEL_RE.search(output)
    return _WORD_TO_INTENT[match.group(1).lower()] if match else None


def example_messages(examples_text: str) -> list[dict[str, str]]:
    turns = []
    for line in examples_text.splitlines():
        request, sep, label = line.partition("=>")
        if sep and request.strip() and label.strip():
            turns.append({"role": "user", "content": request.strip()})
            turns.append({"role": "assistant", "content": label.strip()})
    return turns


class IntentRouter:
    name = "intent-router"
    judge_rubric = JUDGE_RUBRIC
    runs_offline = True  # one LLM call, no tools: the night may call it as often as it needs
    demonstrations = "examples"  # its example turns, one `request => label` per line

    def seed_prompts(self) -> dict[str, str]:
        return dict(SEED_PROMPTS)

    def example_from_trace(self, trace: TraceRecord) -> Example:
        text = trace.user_text
        if not text:
            raise RecordError("input", f"trace {trace.trace_id} has no user message")
        # Production traces carry no gold label; held-out examples come with one.
        return Example(id=trace.trace_id, inputs={"request": text})

    def target_score(self, reply: str, target: str) -> float | None:
        """1 where the reply names the label the right reply names first, else 0."""
        intent = parse_intent(target)
        return None if intent is None else float(parse_intent(reply) == intent)

    def demonstration(self, example: Example, reply: str) -> str | None:
        """`request => label`, with the label `reply` names first; None for a reply that
        names none, or a request the line cannot hold (it says `=>` itself)."""
        intent = parse_intent(reply)
        request = " ".join(str(example.inputs.get("request", "")).split())
        if intent is None or not request or "=>" in request:
            return None
        return f"{request} => {LABELS[intent]}"

    def messages(self, example: Example, prompts: dict[str, str]) -> list[dict[str, str]]:
        return [
            {"role": "system", "content": prompts["instructions"]},
            *example_messages(prompts.get("examples", "")),
            {"role": "user", "content": example.inputs["request"]},
        ]

    async def run(self, example: Example, prompts: dict[str, str], lm: LM, **params) -> Rollout:
        messages = self.messages(example, prompts)
        params.setdefault("max_tokens", 24)
        completion = await lm.complete(messages, **params)
        return Rollout(
            example=example,
            prompts=prompts,
            output=completion.text,
            messages=messages,
            usage={
                "prompt_tokens": completion.usage.prompt_tokens,
                "completion_tokens": completion.usage.completion_tokens,
            },
        )

    def reference_score(self, example: Example, output: str) -> float | None:
        if example.reference is None:
            return None
        return float(parse_intent(output) == example.reference)


def make_agent() -> IntentRouter:
    return IntentRouter()
