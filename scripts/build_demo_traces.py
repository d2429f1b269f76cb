"""Build the demo "production" export shipped in infra/traces/demo_data/.

Real requests (SNIPS, CC0) go through the demo agent with its seed prompt on the
embedded model; the replies are recorded in Langfuse's export shapes (observations v2,
scores v3). The "human" annotations are a stand-in: pass when the reply names the gold
intent, marked `annotation_source = gold_label_proxy`; on a share of the failing ones the
stand-in also writes the corrected output, as an annotator does in Langfuse (a score of
dataType CORRECTION named "output", the right reply as its value). The week before's
traffic, all of it annotated the same way, comes from the router's recorded exchanges in
benchmarks/data/router_labels/ (the same agent, seed prompt and stand-in annotator), so the
judge's held-out labels are enough to measure its agreement. A held-out set of other
requests keeps its true labels for measuring what the flywheel really improved.

Run once (about two minutes):  .venv/bin/python scripts/build_demo_traces.py
Only (re)write the week before's traffic and the corrections of the export in place,
without running the model (tonight's requests, ids and gold labels are drawn from the
same seed):
    .venv/bin/python scripts/build_demo_traces.py --without-model
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

from infra.agents.intent_router import LABELS, SEED_PROMPTS, IntentRouter, parse_intent
from infra.lm.factory import make_lm
from infra.settings import LMSettings
from infra.types import Example

SNIPS = Path(__file__).resolve().parents[2] / "shared" / "data" / "snips"
ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "infra" / "traces" / "demo_data"
ROUTER_LABELS = ROOT / "benchmarks" / "data" / "router_labels" / "labels.jsonl"
TRACES_PER_INTENT = 40
ANNOTATED_FRACTION = 0.6
HELDOUT_PER_INTENT = 20
# Of the failing annotations, the share that also carries a corrected output; the rest
# carry the comment alone, which the night's teacher turns into a correction.
CORRECTED_FRACTION = 0.5
CORRECTION_SEED = 20261206  # its own stream: the traces and annotations above stay as they were
NIGHT = datetime(2026, 11, 29, 18, 0, tzinfo=UTC)
# The week before: every exchange annotated. 30 a kind bring the judge's held-out labels
# to about 150, where kappa's interval is narrow enough to trust (66 left it 0.35 to 0.84).
OLDER_PER_INTENT = 30
OLDER = NIGHT - timedelta(days=7)
REPLY_MAX_TOKENS = 24  # the agent's own cap (IntentRouter.run)
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


def stamp(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def observation(trace_id: str, messages: list[dict], reply: str, start: datetime, usage) -> dict:
    """One generation of the demo agent, as Langfuse exports it."""
    return {
        "id": f"obs-{trace_id[:18]}",
        "traceId": trace_id,
        "type": "GENERATION",
        "name": "route-intent",
        "input": messages,
        "output": {"role": "assistant", "content": reply},
        "model": "smollm2-135m-instruct",
        "promptName": PROMPT_NAME,
        "promptVersion": 1,
        "startTime": stamp(start),
        "endTime": stamp(start + timedelta(milliseconds=480)),
        "tags": ["demo", "snips"],
        "metadata": {"agent": IntentRouter.name},
        "usage": usage,
    }


def annotation(generation: dict, gold: str) -> dict:
    """The stand-in reviewer's pass/fail on a generation, 14 hours after it ran."""
    named = parse_intent(generation["output"]["content"])
    start = datetime.fromisoformat(generation["startTime"])
    return {
        "id": f"score-{generation['traceId'][:18]}",
        "traceId": generation["traceId"],
        "observationId": generation["id"],
        "name": "correct",
        "value": 1.0 if named == gold else 0.0,
        "dataType": "BOOLEAN",
        "source": "ANNOTATION",
        "comment": comment(gold, named),
        "metadata": {"annotation_source": "gold_label_proxy"},
        "timestamp": stamp(start + timedelta(hours=14)),
    }


def older_traffic(taken: set[str]) -> tuple[list[dict], dict[str, str]]:
    """The week before's generations and their gold intents: of the router's recorded
    exchanges, the first OLDER_PER_INTENT of each kind whose request tonight's traffic does
    not hold. Token counts come from the agent's tokenizer, as the engine counts them (the
    end-of-turn token included when the reply stopped before the cap)."""
    from transformers import AutoTokenizer

    from infra.lm.model_files import resolve_model_path

    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(""))
    rows = [json.loads(line) for line in ROUTER_LABELS.read_text().splitlines()]
    agent, kept, gold = IntentRouter(), [], {}
    per_intent: Counter[str] = Counter()
    for row in rows:
        if row["request"] in taken or per_intent[row["intent"]] >= OLDER_PER_INTENT:
            continue
        per_intent[row["intent"]] += 1
        trace_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"flywheel-demo/{row['id']}"))
        messages = agent.messages(
            Example(id=trace_id, inputs={"request": row["request"]}), SEED_PROMPTS
        )
        prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        prompt = prompt["input_ids"] if hasattr(prompt, "keys") else prompt
        reply = len(tokenizer(row["reply"], add_special_tokens=False).input_ids)
        usage = {
            "prompt_tokens": len(prompt),
            "completion_tokens": min(reply + 1, REPLY_MAX_TOKENS),
        }
        start = OLDER + timedelta(seconds=97 * len(kept))
        kept.append(observation(trace_id, messages, row["reply"], start, usage))
        gold[trace_id] = row["intent"]
    return kept, gold


def write_export(tonight: list[dict], annotated: list[dict], gold: dict[str, str]) -> None:
    """Tonight's generations and their annotations, the week before's traffic with all of
    its annotations, and the corrections of both. Tonight's come first, so its corrections
    are drawn as they were before the week before joined (the same seeded stream)."""
    older, older_gold = older_traffic({g["input"][-1]["content"] for g in tonight})
    gold = gold | older_gold
    annotations = annotated + [annotation(g, older_gold[g["traceId"]]) for g in older]
    write_jsonl(OUT / "observations.jsonl", tonight + older)
    write_jsonl(OUT / "scores.jsonl", annotations + corrections(annotations, gold))
    passed = sum(s["value"] for s in annotations)
    print(f"{len(older) + len(tonight)} traces, {len(annotations)} annotations ({passed:.0f} pass)")


def without_model() -> None:
    """Rewrite the week before's traffic and every correction, keeping tonight's
    generations and annotations as they were."""
    traffic, _, ids = draws(random.Random(20261129))
    gold = {trace_id: intent for trace_id, (_, intent) in zip(ids, traffic, strict=True)}
    generations = [
        json.loads(line) for line in (OUT / "observations.jsonl").read_text().splitlines()
    ]
    scores = [json.loads(line) for line in (OUT / "scores.jsonl").read_text().splitlines()]
    tonight = [g for g in generations if g["traceId"] in gold]
    annotated = [s for s in scores if s["dataType"] != "CORRECTION" and s["traceId"] in gold]
    write_export(tonight, annotated, gold)


async def main() -> None:
    rng = random.Random(20261129)
    agent, lm = IntentRouter(), make_lm(LMSettings())
    traffic, heldout, ids = draws(rng)
    requests = [text for text, _ in traffic]
    examples = [Example(id=i, inputs={"request": t}) for i, t in zip(ids, requests, strict=True)]
    rollouts = await asyncio.gather(
        *(agent.run(ex, SEED_PROMPTS, lm, temperature=0.0) for ex in examples)
    )
    tonight, annotated = [], []
    for n, (rollout, (_, gold)) in enumerate(zip(rollouts, traffic, strict=True)):
        start = NIGHT + timedelta(seconds=97 * n)
        tonight.append(
            observation(rollout.example.id, rollout.messages, rollout.output, start, rollout.usage)
        )
        if rng.random() < ANNOTATED_FRACTION:
            annotated.append(annotation(tonight[-1], gold))
    gold = {trace_id: intent for trace_id, (_, intent) in zip(ids, traffic, strict=True)}
    OUT.mkdir(parents=True, exist_ok=True)
    write_export(tonight, annotated, gold)
    write_jsonl(
        OUT / "heldout.jsonl",
        [
            {"id": f"heldout-{n:03d}", "inputs": {"request": t}, "reference": g}
            for n, (t, g) in enumerate(heldout)
        ],
    )
    shutil.copy(SNIPS / "LICENSE", OUT / "LICENSE")
    shutil.copy(SNIPS / "SOURCE.txt", OUT / "SOURCE.txt")
    print(f"{len(heldout)} held-out requests with true labels")


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--without-model", action="store_true")
    if parser.parse_args().without_model:
        without_model()
    else:
        asyncio.run(main())
