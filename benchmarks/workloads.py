"""The request mixes the local-model benchmarks send: real SNIPS voice-assistant requests
(CC0, `../shared/data/snips`) in the shapes flywheel sends to its model."""

from __future__ import annotations

import json
import random
from pathlib import Path

from infra.lm.engine.batcher import Request
from infra.lm.engine.local import LocalLM

SNIPS = (
    Path(__file__).resolve().parents[1].parent / "shared/data/snips/2017-06-custom-intent-engines"
)


def utterances() -> list[tuple[str, str]]:
    """(intent, text) pairs from the SNIPS validation files."""
    pairs = []
    for path in sorted(SNIPS.glob("*/validate_*.json")):
        for intent, rows in json.loads(path.read_text(encoding="latin-1")).items():
            pairs += [(intent, "".join(part["text"] for part in row["data"])) for row in rows]
    return pairs


def varied_requests(
    lm: LocalLM, n: int, seed: int = 4, new_tokens: tuple[int, int] = (32, 224), **request
) -> list[Request]:
    """A user message of 1-3 utterances; 32-224 new tokens, the reference's 128 on average
    (`request`: other `Request` fields, e.g. stop tokens)."""
    rng = random.Random(seed)
    pairs = utterances()
    requests = []
    for _ in range(n):
        text = " ".join(rng.choice(pairs)[1] for _ in range(rng.randint(1, 3)))
        prompt = lm.prompt_ids([{"role": "user", "content": text}])
        requests.append(Request(prompt, rng.randint(*new_tokens), **request))
    return requests


def long_prompt_requests(lm: LocalLM, n: int, seed: int = 0) -> list[Request]:
    rng = random.Random(seed)
    pairs = utterances()
    head = "Name the intent of the user's message, as in these examples:\n"
    requests = []
    for _ in range(n):
        target = rng.randint(30, 400)
        system = head
        while True:  # grow the few-shot block until the prompt reaches its target length
            intent, text = rng.choice(pairs)
            longer = system + f"{text} -> {intent}\n"
            messages = [{"role": "system", "content": longer}, {"role": "user", "content": ""}]
            if len(lm.prompt_ids(messages)) > target - 12:
                break
            system = longer
        _, question = rng.choice(pairs)
        messages = [{"role": "system", "content": system}, {"role": "user", "content": question}]
        prompt = lm.prompt_ids(messages)
        requests.append(Request(prompt, rng.randint(8, 128)))  # no stop: exact lengths
    return requests


def reference_requests(lm: LocalLM, n: int, seed: int = 3) -> list[Request]:
    """The issue's reference shape: a bare user message, 128 new tokens each."""
    rng = random.Random(seed)
    pairs = utterances()
    return [
        Request(lm.prompt_ids([{"role": "user", "content": rng.choice(pairs)[1]}]), 128)
        for _ in range(n)
    ]


def agent_requests(lm: LocalLM, n: int, seed: int = 1) -> list[Request]:
    """One system prompt and few-shot turns shared by all; a user message of its own each."""
    rng = random.Random(seed)
    pairs = utterances()
    shots = rng.sample(pairs, 8)
    head = [
        {"role": "system", "content": "Name the intent of the user's message in one word."},
        *(
            m
            for i, t in shots
            for m in ({"role": "user", "content": t}, {"role": "assistant", "content": i})
        ),
    ]
    requests = []
    for _ in range(n):
        _, question = rng.choice(pairs)
        prompt = lm.prompt_ids([*head, {"role": "user", "content": question}])
        requests.append(Request(prompt, rng.randint(8, 128)))
    return requests


def judge_calls(n: int, seed: int = 2) -> list[list[dict[str, str]]]:
    rng = random.Random(seed)
    pairs = utterances()
    intents = sorted({i for i, _ in pairs})
    rubric = (
        "You grade an intent classifier. The user message and the predicted intent follow. "
        "Answer Yes if the predicted intent is the one the user means, otherwise No. "
        f"The possible intents are: {', '.join(intents)}. Answer with one word."
    )
    calls = []
    for _ in range(n):
        intent, text = rng.choice(pairs)
        guess = intent if rng.random() < 0.5 else rng.choice(intents)
        user = f"Message: {text}\nPredicted intent: {guess}"
        calls.append([{"role": "system", "content": rubric}, {"role": "user", "content": user}])
    return calls
