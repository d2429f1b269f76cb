"""What the embedded judge model can read, asked the way the judge asks: P("Yes") against
P("No") after a yes/no question (`judges.pointwise`), scored by AUC against known answers
(1.0: the true answers always read higher; 0.5: chance; below 0.5: backwards).

Issue 18 wants held-out kappa >= 0.6 on the demo's labels, whose annotators pass a reply
exactly when it names the request's kind by its word ("weather"). The router's rubric says
so, and a rule that only checks for the words agrees at 0.71 (`judge_baselines`). So the
question behind every judge arm is whether the model can see a word at all. Three probes:

- **facts**: questions of common knowledge, half true, half false;
- **a word alone**: 'Does the text contain the word "weather"?' about a text that is one of
  the router's seven kind words (7 of the 49 pairs are yes);
- **the kind's word in a reply**: the same question about the router's replies in
  `benchmarks/data/router_labels/`, for the request's own kind: the check the annotators made.

A model that can follow the rubric scores near 1.0 on each; one that cannot, 0.5 or below.
With `--teach N` a LoRA adapter is then trained on N generic reading exercises (does a
SNIPS request contain a word of its own, or one it lacks; no label of anyone's, no router
reply) and the probes are read again through it: whether the skill is missing from the
weights or only unlearned.

    .venv/bin/python -m benchmarks.judge_model_probe [--replies 120] [--teach 800]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import re
import tempfile
import time
from itertools import product
from pathlib import Path

from sklearn.metrics import roc_auc_score

from benchmarks.judge_label_scale import router_rows
from benchmarks.workloads import utterances
from infra.agents.intent_router import LABELS
from infra.lm.cpu import cpu_summary
from infra.lm.factory import make_lm
from infra.lm.threads import run_in_own_thread
from infra.settings import LMSettings, LoraSettings
from judges.adapter import ServedJudgeAdapter
from judges.pointwise import CHOICES
from weights.lora import train_sft_adapter

Probe = list[tuple[str, bool]]  # (question, its true answer)

FACTS: Probe = [
    ("Is Paris the capital of France?", True),
    ("Do dogs bark?", True),
    ("Is ice cold?", True),
    ("Do fish live in water?", True),
    ("Is the sun hot?", True),
    ("Is Paris the capital of Germany?", False),
    ("Do cats bark?", False),
    ("Is fire cold?", False),
    ("Do fish live in trees?", False),
    ("Is snow hot?", False),
]


WORD = re.compile(r"[A-Za-z]{3,}")


def contains_question(text: str, word: str) -> str:
    return f'Text: "{text}"\n\nDoes the text contain the word "{word}"?'


def asked(question: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"{question} Answer Yes or No."}]


def names(text: str, word: str) -> bool:
    """Whether `text` holds `word` as a word, as the router's parser reads it."""
    return re.search(rf"\b{re.escape(word)}\b", text, re.IGNORECASE) is not None


def word_alone() -> Probe:
    words = sorted(LABELS.values())
    return [(contains_question(text, word), text == word) for text, word in product(words, words)]


def kind_word_in_replies(rows: list[dict], n: int, seed: int = 0) -> Probe:
    """`n` shipped exchanges, drawn by `seed`: does the reply hold its request's kind word?"""
    drawn = random.Random(seed).sample(rows, min(n, len(rows)))
    probe = []
    for row in drawn:
        word = LABELS[row["intent"]]
        probe.append((contains_question(row["reply"], word), names(row["reply"], word)))
    return probe


def word_exercises(texts: list[str], n: int, seed: int = 0) -> list[dict]:
    """`n` prompt-completion records, every other one a yes: does a text contain one of its
    own words (yes), or a word of the other texts that it lacks (no)?"""
    rng = random.Random(seed)
    vocabulary = sorted({w.lower() for t in texts for w in WORD.findall(t)})
    records = []
    while len(records) < n:
        text, yes = rng.choice(texts), len(records) % 2 == 0
        pool = WORD.findall(text) if yes else rng.sample(vocabulary, 5)
        words = [w for w in pool if names(text, w) == yes]
        if words:
            answer = CHOICES[0] if yes else CHOICES[1]
            records.append(
                {
                    "prompt": asked(contains_question(text, rng.choice(words))),
                    "completion": [{"role": "assistant", "content": answer}],
                }
            )
    rng.shuffle(records)
    return records


async def p_yes(lm, question: str, adapter: str | None = None) -> float:
    logps = await lm.choice_logprobs(asked(question), list(CHOICES), adapter=adapter)
    yes, no = (math.exp(lp) for lp in logps)
    return yes / (yes + no)


async def read(lm, probe: Probe, adapter: str | None = None) -> dict[str, float]:
    """AUC of P(Yes) against the true answers, and how often the model leans yes."""
    probs = [await p_yes(lm, question, adapter) for question, _ in probe]
    truth = [answer for _, answer in probe]
    on_true = [p for p, t in zip(probs, truth, strict=True) if t]
    on_false = [p for p, t in zip(probs, truth, strict=True) if not t]
    return {
        "auc": float(roc_auc_score(truth, probs)),
        "mean P(Yes), true": sum(on_true) / len(on_true),
        "mean P(Yes), false": sum(on_false) / len(on_false),
        "questions": len(probe),
        "true": sum(truth),
    }


async def read_all(lm, probes: dict[str, Probe], adapter: str | None, who: str) -> dict:
    results = {}
    for name, probe in probes.items():
        results[name] = r = await read(lm, probe, adapter)
        print(
            f"{who}, {name}: AUC {r['auc']:.3f} ({r['true']} true of {r['questions']}); "
            f"mean P(Yes) {r['mean P(Yes), true']:.2f} where true, "
            f"{r['mean P(Yes), false']:.2f} where false",
            flush=True,
        )
    return results


async def taught(lm, exercises: int, folder: Path) -> str:
    """The name the model serves an adapter trained on `exercises` reading exercises under."""
    records = word_exercises([text for _, text in utterances()], exercises)
    cfg = LoraSettings(epochs=1, batch_size=8, micro_batch_size=8)
    started = time.perf_counter()
    result = await run_in_own_thread(train_sft_adapter, records, lm.base_model_path, folder, cfg)
    print(
        f"taught: {result.examples} exercises, {result.steps} steps, "
        f"{time.perf_counter() - started:.0f} s",
        flush=True,
    )
    return await ServedJudgeAdapter(lm, str(folder)).name()


async def run(lm, replies: int, teach: int = 0) -> dict[str, dict]:
    probes = {
        "facts": FACTS,
        "a word alone": word_alone(),
        "the kind's word in a reply": kind_word_in_replies(router_rows(), replies),
    }
    results = {"base": await read_all(lm, probes, None, "base model")}
    if teach:
        with tempfile.TemporaryDirectory(prefix="judge-probe-") as scratch:
            adapter = await taught(lm, teach, Path(scratch) / "reading")
            results["taught"] = await read_all(lm, probes, adapter, "taught")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replies", type=int, default=120, help="router replies to probe")
    parser.add_argument("--teach", type=int, default=0, help="reading exercises to train on")
    args = parser.parse_args()
    print(cpu_summary())
    asyncio.run(run(make_lm(LMSettings()), args.replies, args.teach))


if __name__ == "__main__":
    main()
