"""Build the sample "production" export in traces/: 140 SNIPS requests through agent.py.

Each request (SNIPS train split, CC0) goes through the agent's two steps with the seed
prompts in prompts.py, on flywheel's embedded model, offline, with greedy decoding. The
prompts are rendered with the Langfuse SDK's own template compiler, so every recorded
input is exactly what `prompt.compile(...)` gives in agent.py. The "human" annotations
on 60% of the traces are a stand-in: pass when the final reply names the gold intent's
plain word (`annotation_source = gold_label_proxy`).

Run (a minute or two on CPU):  .venv/bin/python examples/request_reply/build_traces.py
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import shutil
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from langfuse.model import TemplateParser

from infra.agents.intent_router import LABELS
from infra.lm.factory import make_lm
from infra.lm.protocol import Completion
from infra.settings import LMSettings

if not __package__:  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from examples.export_files import share, write_jsonl  # noqa: E402
from examples.request_reply.prompts import (  # noqa: E402
    CLASSIFY_PROMPT,
    CLASSIFY_REQUEST,
    KINDS,
    REPLY_PROMPT,
    WRITE_REPLY,
)

SNIPS = Path(__file__).resolve().parents[3] / "shared" / "data" / "snips"
OUT = Path(__file__).resolve().parent / "traces"
COMMAND = ".venv/bin/python examples/request_reply/build_traces.py"
SEED = 20261201
TRACES_PER_INTENT = 20
ANNOTATED_FRACTION = 0.6
MORNING = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
MODEL = "smollm2-135m-instruct"
CLASSIFY_PARAMS = {"max_tokens": 8, "temperature": 0}
REPLY_PARAMS = {"max_tokens": 40, "temperature": 0}
TAGS = ["example", "snips"]
KIND_RE = re.compile(r"\b(" + "|".join(KINDS) + r")\b", re.IGNORECASE)


def utterances(path: Path) -> list[str]:
    raw = json.loads(path.read_bytes().decode("utf-8", "surrogatepass"))
    (records,) = raw.values()
    return [" ".join("".join(chunk["text"] for chunk in r["data"]).split()) for r in records]


def sample(per_intent: int, rng: random.Random) -> list[tuple[str, str]]:
    """(request, gold kind as a plain word) pairs from the SNIPS train split, shuffled."""
    pairs = []
    for intent in sorted(LABELS):
        path = SNIPS / "2017-06-custom-intent-engines" / intent / f"train_{intent}.json"
        texts = sorted(set(utterances(path)))
        pairs += [(text, LABELS[intent]) for text in rng.sample(texts, per_intent)]
    rng.shuffle(pairs)
    return pairs


def compiled(messages: list[dict[str, str]], variables: dict[str, str]) -> list[dict[str, str]]:
    """What Langfuse's `prompt.compile(**variables)` gives, message by message."""
    return [
        {"role": m["role"], "content": TemplateParser.compile_template(m["content"], variables)}
        for m in messages
    ]


def named_kind(text: str) -> str | None:
    """The first of the seven kinds the text names, or None."""
    match = KIND_RE.search(text)
    return match.group(1).lower() if match else None


def passes(gold: str, reply: str) -> bool:
    return re.search(rf"\b{gold}\b", reply, re.IGNORECASE) is not None


def comment(gold: str, reply: str) -> str:
    if passes(gold, reply):
        return f"correct: the reply names {gold}"
    named = named_kind(reply)
    return f"expected {gold}; the reply said {named or 'no kind'}"


def stamp(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def generation(
    trace_id: str,
    obs_id: str,
    parent: str,
    name: str,
    sent: list[dict[str, str]],
    completion: Completion,
    params: dict,
    variables: dict[str, str],
    start: datetime,
) -> dict:
    usage = completion.usage
    end = start + timedelta(milliseconds=150 + 25 * usage.completion_tokens)
    return {
        "id": obs_id,
        "traceId": trace_id,
        "parentObservationId": parent,
        "type": "GENERATION",
        "name": name,
        "input": sent,
        "output": {"role": "assistant", "content": completion.text.strip()},
        "model": MODEL,
        "modelParameters": params,
        "promptName": name,
        "promptVersion": 1,
        "startTime": stamp(start),
        "endTime": stamp(end),
        "tags": TAGS,
        "metadata": {"prompt_variables": variables},
        "usage": {
            "input": usage.prompt_tokens,
            "output": usage.completion_tokens,
            "total": usage.prompt_tokens + usage.completion_tokens,
            "unit": "TOKENS",
        },
    }


async def main() -> None:
    rng = random.Random(SEED)
    lm = make_lm(LMSettings())
    traffic = sample(TRACES_PER_INTENT, rng)
    trace_ids = [str(uuid.UUID(int=rng.getrandbits(128))) for _ in traffic]
    classify_prompt = [{"role": "user", "content": CLASSIFY_PROMPT}]

    first = [compiled(classify_prompt, {"request": r}) for r, _ in traffic]
    kinds = await asyncio.gather(*(lm.complete(m, **CLASSIFY_PARAMS) for m in first))
    second = [
        compiled(REPLY_PROMPT, {"request": r, "kind": k.text.strip()})
        for (r, _), k in zip(traffic, kinds, strict=True)
    ]
    replies = await asyncio.gather(*(lm.complete(m, **REPLY_PARAMS) for m in second))

    annotated = set(rng.sample(range(len(traffic)), round(ANNOTATED_FRACTION * len(traffic))))
    observations, scores, outcomes = [], [], []  # outcomes: (step 1 right, reply passes)
    for n, (trace_id, (request, gold)) in enumerate(zip(trace_ids, traffic, strict=True)):
        start = MORNING + timedelta(seconds=97 * n)
        ids = [f"obs-{trace_id[:18]}-{k}" for k in range(3)]
        kind, reply = kinds[n].text.strip(), replies[n].text.strip()
        classify = generation(
            trace_id, ids[1], ids[0], CLASSIFY_REQUEST, first[n], kinds[n],
            CLASSIFY_PARAMS, {"request": request}, start + timedelta(milliseconds=4),
        )  # fmt: skip
        write = generation(
            trace_id, ids[2], ids[0], WRITE_REPLY, second[n], replies[n], REPLY_PARAMS,
            {"request": request, "kind": kind},
            datetime.fromisoformat(classify["endTime"]) + timedelta(milliseconds=3),
        )  # fmt: skip
        root = {
            "id": ids[0],
            "traceId": trace_id,
            "type": "SPAN",
            "name": "handle-request",
            "input": {"request": request},
            "output": reply,
            "startTime": stamp(start),
            "endTime": stamp(datetime.fromisoformat(write["endTime"]) + timedelta(milliseconds=2)),
            "tags": TAGS,
            "metadata": {},
        }
        observations += [root, classify, write]
        outcomes.append((named_kind(kind) == gold, passes(gold, reply)))
        if n in annotated:
            scores.append(
                {
                    "id": f"score-{trace_id[:18]}",
                    "traceId": trace_id,
                    "name": "correct",
                    "value": 1.0 if passes(gold, reply) else 0.0,
                    "dataType": "BOOLEAN",
                    "source": "ANNOTATION",
                    "comment": comment(gold, reply),
                    "metadata": {"annotation_source": "gold_label_proxy"},
                    "timestamp": stamp(start + timedelta(hours=6)),
                }
            )

    figures = {
        "passing": share([ok for _, ok in outcomes]),
        "step 1 named the gold kind": share([right for right, _ in outcomes]),
        "passing where step 1 was right": share([ok for right, ok in outcomes if right]),
        "passing where step 1 was wrong": share([ok for right, ok in outcomes if not right]),
    }
    write_export(observations, scores, figures)
    print(f"{len(outcomes)} traces written ({len(observations)} observations) to {OUT}")
    print(f"{len(scores)} annotated, {sum(s['value'] for s in scores):.0f} of them passing")
    for what, figure in figures.items():
        print(f"{what}: {figure}")


def write_export(observations: list[dict], scores: list[dict], figures: dict[str, str]) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    write_jsonl(OUT / "observations.jsonl", observations)
    write_jsonl(OUT / "scores.jsonl", scores)
    common = {"labels": ["production", "latest"], "config": {}, "tags": [], "commitMessage": None}
    prompts = [
        {"name": CLASSIFY_REQUEST, "version": 1, "type": "text", "prompt": CLASSIFY_PROMPT},
        {"name": WRITE_REPLY, "version": 1, "type": "chat", "prompt": REPLY_PROMPT},
    ]
    write_jsonl(OUT / "prompts.jsonl", [p | common for p in prompts])
    shutil.copyfile(SNIPS / "LICENSE", OUT / "LICENSE")
    (OUT / "SOURCE.txt").write_text(SOURCE)
    results = "".join(f"- {what}: {figure}\n" for what, figure in figures.items())
    (OUT / "README.md").write_text(README.format(command=COMMAND, results=results))


SOURCE = f"""\
Requests: the SNIPS NLU benchmark, "2017-06 custom intent engines" (7 intents), CC0 1.0
(the upstream LICENSE is copied next to this file).
Upstream repo: https://github.com/sonos/nlu-benchmark
Commit: b86ac7f1577868c42158d0dec77db50956046696
Used: 2017-06-custom-intent-engines/<Intent>/train_<Intent>.json, {TRACES_PER_INTENT} distinct
  utterances per intent drawn with random.Random({SEED}); utterance = the concatenation of
  the record's "text" chunks, whitespace collapsed. The gold intent (the file's top-level
  key) is kept out of the traces; it only decides the stand-in annotations in scores.jsonl.
Upstream asks publications to cite: Coucke A. et al., "Snips Voice Platform: an embedded
  Spoken Language Understanding system for private-by-design voice interfaces", 2018,
  arXiv:1805.10190.
Replies: generated by SmolLM2-135M-Instruct (flywheel's embedded model, Apache-2.0).
"""

README = """\
# Sample production traces of the request/reply agent

A Langfuse JSONL export of 140 traces of `../agent.py`, a two-step voice-assistant agent
on real requests from SNIPS (CC0, see SOURCE.txt):

- `observations.jsonl`: per trace a root span `handle-request` and two generations,
  `classify-request` (TEXT prompt) then `write-reply` (CHAT prompt), each with its prompt
  name and version and the variables it was compiled with (`metadata.prompt_variables`).
- `scores.jsonl`: a stand-in for human annotation on 60% of the traces: `correct`
  (BOOLEAN, ANNOTATION) is 1 when the final reply names the request's gold kind
  (`metadata.annotation_source = gold_label_proxy`).
- `prompts.jsonl`: the two prompts' version 1 (labelled production), Langfuse's API shape.

Built offline with flywheel's embedded model (SmolLM2-135M-Instruct, greedy) and the
seed prompts in `../prompts.py`, from the repository root:

    {command}

Measured on these traces:

{results}"""


if __name__ == "__main__":
    asyncio.run(main())
