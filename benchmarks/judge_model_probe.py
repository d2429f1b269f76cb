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
weights or only unlearned. `--rubric-exercises M` adds M exercises on the judge's own
prompt, under made-up rubrics of the same kind ("a reply passes when it contains one of
these words: ..."), so that the skill is asked for the way a rubric asks for it.

`--judge` then reads each model as a judge with no label training: the router's rubric on
the judge's prompt, its cut calibrated on 100 labels, kappa on the label-scale run's 256
held-out ones (`judge_label_scale`): does a model that can see the word judge by it? And
again on the annotators' rule written as such a made-up rubric (`WORD_LIST_RUBRIC`).

    .venv/bin/python -m benchmarks.judge_model_probe [--replies 120] [--teach 800]
        [--rubric-exercises 800] [--judge]
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

from benchmarks.judge_label_scale import label_pool, router_rows, sized
from benchmarks.judge_lora import judge_score
from benchmarks.judge_model import judge_lm
from benchmarks.workloads import utterances
from infra.agents.intent_router import JUDGE_RUBRIC, LABELS
from infra.lm.engine.cpu import cpu_summary
from infra.lm.threads import run_in_own_thread
from infra.settings import LoraSettings
from judges.adapter import ServedJudgeAdapter
from judges.agreement import agreement_report
from judges.calibration import calibrate_threshold
from judges.pointwise import CHOICES, PASS_QUESTION, judge_messages
from judges.types import JudgedItem
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


def vocabulary(texts: list[str]) -> list[str]:
    return sorted({w.lower() for t in texts for w in WORD.findall(t)})


def exercise(prompt: list[dict[str, str]], yes: bool) -> dict:
    """A prompt-completion record (trl's format) whose completion is the right answer."""
    answer = CHOICES[0] if yes else CHOICES[1]
    return {"prompt": prompt, "completion": [{"role": "assistant", "content": answer}]}


def word_exercises(texts: list[str], n: int, seed: int = 0) -> list[dict]:
    """`n` prompt-completion records, every other one a yes: does a text contain one of its
    own words (yes), or a word of the other texts that it lacks (no)?"""
    rng, words_of_all = random.Random(seed), vocabulary(texts)
    records = []
    while len(records) < n:
        text, yes = rng.choice(texts), len(records) % 2 == 0
        pool = WORD.findall(text) if yes else rng.sample(words_of_all, 5)
        words = [w for w in pool if names(text, w) == yes]
        if words:
            records.append(exercise(asked(contains_question(text, rng.choice(words))), yes))
    rng.shuffle(records)
    return records


LIST_RUBRICS = (  # made-up rubrics of the router's kind: a reply must say one of some words
    "You review replies of an assistant. A reply passes when it contains one of these "
    "words: {words}. It fails when it contains none of them.",
    "You review replies. Its reply must name one of: {words}. A reply passes when it names "
    "one. It fails when it names none or says anything else.",
    "You check texts for a team. A reply passes only if it says {words}. Otherwise it fails.",
)


def listed(words: list[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


# the annotators' rule as such a rubric says it (they also ask for the request's own kind)
WORD_LIST_RUBRIC = LIST_RUBRICS[0].format(words=listed(list(LABELS.values())))


def rubric_exercises(texts: list[str], n: int, seed: int = 1) -> list[dict]:
    """`n` records on the judge's own prompt, every other one a pass: a made-up rubric
    lists 1-8 words, the reply (one text, the request another) holds one of them or none."""
    rng, words_of_all = random.Random(seed), vocabulary(texts)
    records = []
    while len(records) < n:
        request, reply, yes = rng.choice(texts), rng.choice(texts), len(records) % 2 == 0
        absent = [w for w in rng.sample(words_of_all, 12) if not names(reply, w)]
        words, own = absent[: rng.randint(1, 8)], WORD.findall(reply)
        if not words or (yes and not own):
            continue
        if yes:
            words[rng.randrange(len(words))] = rng.choice(own).lower()
        rubric = rng.choice(LIST_RUBRICS).format(words=listed(words))
        item = JudgedItem("exercise", request, reply)
        records.append(exercise(judge_messages(rubric, item, PASS_QUESTION), yes))
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


Split = tuple[list[JudgedItem], list[JudgedItem]]  # (labels to calibrate the cut on, held out)


def judge_split() -> Split:
    """The label-scale run's first 100 labels (its training and validation ones at 100) and
    its 256 held-out ones."""
    heldout, rest = label_pool(256)
    train, val = sized(rest, 100)
    return train + val, heldout


async def judged(
    lm, folder: str | None, who: str, split: Split, rubric: str = JUDGE_RUBRIC
) -> dict:
    """The model as a judge on `rubric` with no label training: the cut calibrated on the
    split's first labels, agreement on its held-out ones."""
    calibration, heldout = split
    score = judge_score(lm, rubric, folder)
    gold_calibration = [i.human_pass for i in calibration]
    cut = calibrate_threshold(await score(calibration), gold_calibration)
    probs, gold = await score(heldout), [i.human_pass for i in heldout]
    report = agreement_report([p >= cut for p in probs], gold, seed=0)
    report["auc"] = float(roc_auc_score(gold, probs))
    print(
        f"{who}: held-out kappa {report['kappa']:.3f} "
        f"[{report['kappa_low']:.3f}, {report['kappa_high']:.3f}], AUC {report['auc']:.3f}, "
        f"TPR {report['tpr']:.2f}, TNR {report['tnr']:.2f} ({len(heldout)} labels)",
        flush=True,
    )
    return report


async def judged_both(lm, folder: str | None, who: str, split: Split) -> dict[str, dict]:
    """On the router's rubric, and on the annotators' rule written as a made-up one."""
    return {
        "router's rubric": await judged(
            lm, folder, f"{who}, judging on the router's rubric", split
        ),
        "word list": await judged(
            lm, folder, f"{who}, judging on the seven words as a list", split, WORD_LIST_RUBRIC
        ),
    }


async def taught(lm, exercises: int, folder: Path, on_rubrics: int = 0) -> str:
    """The name the model serves an adapter trained on `exercises` reading exercises (and
    `on_rubrics` on the judge's prompt) under."""
    texts = [text for _, text in utterances()]
    records = word_exercises(texts, exercises)
    if on_rubrics:
        records += rubric_exercises(texts, on_rubrics)
        random.Random(0).shuffle(records)
    cfg = LoraSettings(epochs=1, batch_size=8, micro_batch_size=8)
    started = time.perf_counter()
    result = await run_in_own_thread(train_sft_adapter, records, lm.base_model_path, folder, cfg)
    print(
        f"taught: {result.examples} exercises, {result.steps} steps, "
        f"{time.perf_counter() - started:.0f} s",
        flush=True,
    )
    return await ServedJudgeAdapter(lm, str(folder)).name()


async def run(
    lm, replies: int, teach: int = 0, on_rubrics: int = 0, judge: bool = False
) -> dict[str, dict]:
    probes = {
        "facts": FACTS,
        "a word alone": word_alone(),
        "the kind's word in a reply": kind_word_in_replies(router_rows(), replies),
    }
    results = {"base": await read_all(lm, probes, None, "base model")}
    split = judge_split() if judge else None
    if split:
        results["base"]["judging"] = await judged_both(lm, None, "base model", split)
    if teach:
        with tempfile.TemporaryDirectory(prefix="judge-probe-") as scratch:
            folder = Path(scratch) / "reading"
            adapter = await taught(lm, teach, folder, on_rubrics)
            results["taught"] = await read_all(lm, probes, adapter, "taught")
            if split:
                results["taught"]["judging"] = await judged_both(lm, str(folder), "taught", split)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replies", type=int, default=120, help="router replies to probe")
    parser.add_argument("--teach", type=int, default=0, help="reading exercises to train on")
    parser.add_argument(
        "--rubric-exercises", type=int, default=0, help="with --teach: ones on a rubric too"
    )
    parser.add_argument("--judge", action="store_true", help="read each model as a judge")
    args = parser.parse_args()
    if args.rubric_exercises and not args.teach:
        parser.error("--rubric-exercises adds to --teach's exercises: give --teach too")
    print(cpu_summary())
    lm = judge_lm()
    asyncio.run(run(lm, args.replies, args.teach, args.rubric_exercises, args.judge))


if __name__ == "__main__":
    main()
