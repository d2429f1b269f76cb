"""Build the demo "production" export shipped in infra/traces/demo_data/.

Real requests (SNIPS, CC0) go through the demo agent with its seed prompt on the
embedded model; the replies are recorded in Langfuse's export shapes (observations v2,
scores v3). The "human" annotations are a stand-in: pass when the reply names the gold
intent, marked `annotation_source = gold_label_proxy`. A held-out set of other requests
keeps its true labels for measuring what the flywheel really improved.

Run once (about two minutes):  .venv/bin/python scripts/build_demo_traces.py
"""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from infra.agents.intent_router import LABELS, SEED_PROMPTS, IntentRouter, parse_intent
from infra.lm.factory import make_lm
from infra.settings import LMSettings
from infra.types import Example

SNIPS = Path(__file__).resolve().parents[2] / "shared" / "data" / "snips"
OUT = Path(__file__).resolve().parents[1] / "infra" / "traces" / "demo_data"
TRACES_PER_INTENT = 40
ANNOTATED_FRACTION = 0.6
HELDOUT_PER_INTENT = 20
NIGHT = datetime(2026, 11, 29, 18, 0, tzinfo=UTC)
PROMPT_NAME = "intent-router"


def utterances(path: Path) -> list[str]:
    raw = json.loads(path.read_bytes().decode("utf-8", "surrogatepass"))
    (records,) = raw.values()
    return [" ".join("".join(chunk["text"] for chunk in r["data"]).split()) for r in records]


def sample(kind: str, per_intent: int, rng: random.Random) -> list[tuple[str, str]]:
    pairs = []
    for intent in sorted(LABELS):
        texts = sorted(
            set(
                utterances(
                    SNIPS / "2017-06-custom-intent-engines" / intent / f"{kind}_{intent}.json"
                )
            )
        )
        pairs += [(text, intent) for text in rng.sample(texts, per_intent)]
    rng.shuffle(pairs)
    return pairs


def comment(gold: str, named: str | None) -> str:
    expected = LABELS[gold]
    if named == gold:
        return f"correct: {expected}"
    if named is None:
        return f"expected {expected}; the reply named none"
    return f"expected {expected}; the reply said {LABELS[named]}"


async def main() -> None:
    rng = random.Random(20261129)
    agent, lm = IntentRouter(), make_lm(LMSettings())
    traffic = sample("train", TRACES_PER_INTENT, rng)
    heldout = sample("validate", HELDOUT_PER_INTENT, rng)
    ids = [str(uuid.UUID(int=rng.getrandbits(128))) for _ in traffic]
    requests = [text for text, _ in traffic]
    examples = [Example(id=i, inputs={"request": t}) for i, t in zip(ids, requests, strict=True)]
    rollouts = await asyncio.gather(
        *(agent.run(ex, SEED_PROMPTS, lm, temperature=0.0) for ex in examples)
    )
    observations, scores = [], []
    for n, (rollout, (_, gold)) in enumerate(zip(rollouts, traffic, strict=True)):
        start = NIGHT + timedelta(seconds=97 * n)
        observations.append(
            {
                "id": f"obs-{rollout.example.id[:18]}",
                "traceId": rollout.example.id,
                "type": "GENERATION",
                "name": "route-intent",
                "input": rollout.messages,
                "output": {"role": "assistant", "content": rollout.output},
                "model": "smollm2-135m-instruct",
                "promptName": PROMPT_NAME,
                "promptVersion": 1,
                "startTime": start.isoformat().replace("+00:00", "Z"),
                "endTime": (start + timedelta(milliseconds=480)).isoformat().replace("+00:00", "Z"),
                "tags": ["demo", "snips"],
                "metadata": {"agent": agent.name},
                "usage": rollout.usage,
            }
        )
        if rng.random() < ANNOTATED_FRACTION:
            named = parse_intent(rollout.output)
            scores.append(
                {
                    "id": f"score-{rollout.example.id[:18]}",
                    "traceId": rollout.example.id,
                    "observationId": observations[-1]["id"],
                    "name": "correct",
                    "value": 1.0 if named == gold else 0.0,
                    "dataType": "BOOLEAN",
                    "source": "ANNOTATION",
                    "comment": comment(gold, named),
                    "metadata": {"annotation_source": "gold_label_proxy"},
                    "timestamp": (start + timedelta(hours=14)).isoformat().replace("+00:00", "Z"),
                }
            )
    OUT.mkdir(parents=True, exist_ok=True)
    write_jsonl(OUT / "observations.jsonl", observations)
    write_jsonl(OUT / "scores.jsonl", scores)
    write_jsonl(
        OUT / "heldout.jsonl",
        [
            {"id": f"heldout-{n:03d}", "inputs": {"request": t}, "reference": g}
            for n, (t, g) in enumerate(heldout)
        ],
    )
    shutil.copy(SNIPS / "LICENSE", OUT / "LICENSE")
    shutil.copy(SNIPS / "SOURCE.txt", OUT / "SOURCE.txt")
    passed = sum(s["value"] for s in scores)
    print(f"{len(observations)} traces, {len(scores)} annotations ({passed:.0f} pass)")
    print(f"{len(heldout)} held-out requests with true labels")


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))


if __name__ == "__main__":
    asyncio.run(main())
