"""Build the labelled router exchanges shipped in benchmarks/data/router_labels/: more of
what the demo's annotations are, for measuring how a judge gains with labels on a held-out
set large enough to tell (`benchmarks/judge_label_scale.py`).

Requests none of the demo's annotations hold (SNIPS train files, CC0), 70 per intent, go
through the demo router with its seed prompt on the embedded model, as the demo's traffic
did (`build_demo_traces.py`); each is labelled by the demo's stand-in annotator (pass when
the reply names the gold intent) with the same comments. The replies depend on the CPU's
arithmetic (bf16 or float32), so the file is built once and shipped.

Run once (about eight minutes on 2 cores):  .venv/bin/python scripts/build_router_labels.py
"""

from __future__ import annotations

import asyncio
import random
import shutil
from pathlib import Path

from build_demo_traces import SNIPS, comment, utterances, write_jsonl

from flows.night.collect import collect
from infra.agents.intent_router import LABELS, SEED_PROMPTS, IntentRouter, parse_intent
from infra.lm.factory import make_lm
from infra.settings import LMSettings
from infra.traces.jsonl import JsonlTraceSource
from infra.types import Example

OUT = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "router_labels"
PER_INTENT = 70


def demo_annotated_requests() -> set[str]:
    batch = JsonlTraceSource().fetch(since=None, limit=10_000)
    return {item.input_text for item in collect(batch, IntentRouter(), "correct").items}


async def main() -> None:
    rng = random.Random(7)
    taken = demo_annotated_requests()
    pairs = []
    for intent in sorted(LABELS):
        path = SNIPS / "2017-06-custom-intent-engines" / intent / f"train_{intent}.json"
        texts = sorted(set(utterances(path)) - taken)
        pairs += [(text, intent) for text in rng.sample(texts, PER_INTENT)]
    rng.shuffle(pairs)
    agent, lm = IntentRouter(), make_lm(LMSettings())
    examples = [
        Example(id=f"router-{n:04d}", inputs={"request": text}) for n, (text, _) in enumerate(pairs)
    ]
    rollouts = await asyncio.gather(
        *(agent.run(ex, SEED_PROMPTS, lm, temperature=0.0) for ex in examples)
    )
    rows = []
    for example, rollout, (text, gold) in zip(examples, rollouts, pairs, strict=True):
        named = parse_intent(rollout.output)
        rows.append(
            {
                "id": example.id,
                "request": text,
                "reply": rollout.output,
                "passed": named == gold,
                "comment": comment(gold, named),
                "intent": gold,
            }
        )
    OUT.mkdir(parents=True, exist_ok=True)
    write_jsonl(OUT / "labels.jsonl", rows)
    shutil.copy(SNIPS / "LICENSE", OUT / "LICENSE")
    shutil.copy(SNIPS / "SOURCE.txt", OUT / "SOURCE.txt")
    print(f"{len(rows)} labelled exchanges ({sum(r['passed'] for r in rows)} pass) in {OUT}")


if __name__ == "__main__":
    asyncio.run(main())
