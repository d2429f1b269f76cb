"""Build the demo "production" export shipped in infra/traces/demo_data/.

Real requests (SNIPS, CC0) go through the demo agent with its seed prompt on the
embedded model; the replies are recorded in Langfuse's export shapes (observations v2,
scores v3). The "human" annotations are a stand-in: pass when the reply names the gold
intent, marked `annotation_source = gold_label_proxy`; on a share of the failing ones the
stand-in also writes the corrected output, as an annotator does in Langfuse (a score of
dataType CORRECTION named "output", the right reply as its value). A held-out set of
other requests keeps its true labels for measuring what the flywheel really improved.

Run once (about two minutes):  .venv/bin/python scripts/build_demo_traces.py
Only (re)write the corrections of the export in place, without running the model (the
requests, ids and gold labels are drawn from the same seed):
    .venv/bin/python scripts/build_demo_traces.py --corrections-only
"""

from __future__ import annotations

import argparse
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
# Of the failing annotations, the share that also carries a corrected output; the rest
# carry the comment alone, which the night's teacher turns into a correction.
CORRECTED_FRACTION = 0.5
CORRECTION_SEED = 20261206  # its own stream: the traces and annotations above stay as they were
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


def draws(rng: random.Random) -> tuple[list[tuple[str, str]], list[tuple[str, str]], list[str]]:
    """The traffic and held-out (request, gold intent) pairs and the traffic's trace ids,
    drawn before any model call, so they are the same with or without the model."""
    traffic = sample("train", TRACES_PER_INTENT, rng)
    heldout = sample("validate", HELDOUT_PER_INTENT, rng)
    ids = [str(uuid.UUID(int=rng.getrandbits(128))) for _ in traffic]
    return traffic, heldout, ids


def corrections(scores: list[dict], gold: dict[str, str]) -> list[dict]:
    """A corrected output on a seeded share of the failing annotations: the reply the
    agent should have given (the gold intent's word), a minute after the annotation."""
    rng = random.Random(CORRECTION_SEED)
    out = []
    for score in scores:
        if score["value"] != 0.0 or rng.random() >= CORRECTED_FRACTION:
            continue
        made = datetime.fromisoformat(score["timestamp"]) + timedelta(minutes=1)
        out.append(
            {
                "id": "correction-" + score["traceId"][:18],
                "traceId": score["traceId"],
                "observationId": score["observationId"],
                "name": "output",
                "value": LABELS[gold[score["traceId"]]],
                "dataType": "CORRECTION",
                "source": "ANNOTATION",
                "metadata": {"annotation_source": "gold_label_proxy"},
                "timestamp": made.isoformat().replace("+00:00", "Z"),
            }
        )
    return out


def corrections_only() -> None:
    """Rewrite the export's corrections from its annotations, touching nothing else."""
    traffic, _, ids = draws(random.Random(20261129))
    gold = {trace_id: intent for trace_id, (_, intent) in zip(ids, traffic, strict=True)}
    rows = [json.loads(line) for line in (OUT / "scores.jsonl").read_text().splitlines()]
    annotations = [row for row in rows if row["dataType"] != "CORRECTION"]
    corrected = corrections(annotations, gold)
    write_jsonl(OUT / "scores.jsonl", annotations + corrected)
    print(f"{len(corrected)} corrected outputs on {len(annotations)} annotations")


async def main() -> None:
    rng = random.Random(20261129)
    agent, lm = IntentRouter(), make_lm(LMSettings())
    traffic, heldout, ids = draws(rng)
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
    gold = {trace_id: intent for trace_id, (_, intent) in zip(ids, traffic, strict=True)}
    OUT.mkdir(parents=True, exist_ok=True)
    write_jsonl(OUT / "observations.jsonl", observations)
    write_jsonl(OUT / "scores.jsonl", scores + corrections(scores, gold))
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
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corrections-only", action="store_true")
    if parser.parse_args().corrections_only:
        corrections_only()
    else:
        asyncio.run(main())
