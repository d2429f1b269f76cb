"""Reflection meta-prompts on the demo task, with the night's teacher as the reflector:
how many proposals differ from their parent, how many are usable, and what they are worth
on held-out requests.

Per proposal: a minibatch of the demo's labelled traces (`--minibatch`, the night's
`reflection_minibatch_size`, drawn by the proposal's number), the router's seed prompts
as the parent, and the reflective dataset the night builds
(`judges.agent_metric.AgentJudgeAdapter.make_reflective_dataset`) over the replies as
logged, with the annotator's comment where the night's judge writes its rationale and the
human label as its verdict. Every template reflects on the same N minibatches with the
same sampling seeds (the night's `infra.lm.reflection.reflection_lm`: temperature 0.7,
`--max-tokens`), so templates are compared pair by pair.

Each reply goes through the engine's extraction (`gepa_opt.extraction`). A proposal
"differs" when its text is not the parent's (whitespace aside; the engine rejects an equal
one as UNCHANGED) and is "usable" when it is non-empty, does not restate the meta-prompt
(`gepa_opt.refusal`) and does not address the judge (`judges.addressing`, which the
night's adapter refuses). Each distinct usable proposal that differs is scored on
`heldout.jsonl` (140 SNIPS requests no trace holds, true labels) by the 135M agent
(`make_lm(LMSettings())`, greedy, 24 tokens), with the seed's example turn, against the
seed prompts on the same requests. "mean all" counts a proposal that is not a candidate
(unchanged, empty, refused) at the seed's accuracy: the parent GEPA keeps.

The teacher is loaded once for all templates and closed before the agent is loaded
(`--teacher`: a folder or an embedded name; the local engine runs Qwen2 checkpoints).
Proposals are kept in `--out` (JSON); `--reuse` scores the ones already there.

    .venv/bin/python -m benchmarks.reflection_templates [--templates paper edit ...]
        [--n 12] [--minibatch 6] [--max-tokens 200] [--seed 0] [--out FILE] [--reuse]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import re
import subprocess
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean
from typing import Any

from benchmarks.demonstrations import accuracy_of, labelled
from benchmarks.intent_task import HELDOUT
from flows.night.collect import Collected, collect, load_heldout
from gepa_opt import EvaluationBatch
from gepa_opt.extraction import extract_proposal
from gepa_opt.meta_prompt import (
    CURRENT_INSTRUCTIONS,
    EXAMPLES,
    REFLECTION_TEMPLATES,
    build_reflection_prompt,
)
from gepa_opt.refusal import restates_meta_prompt
from infra.agents.intent_router import SEED_PROMPTS, IntentRouter
from infra.lm.factory import make_lm
from infra.lm.reflection import reflection_lm
from infra.settings import AgentOptSettings, JudgeSettings, LMSettings
from infra.traces.jsonl import JsonlTraceSource
from infra.types import Example, Rollout
from judges.addressing import addresses_judge
from judges.agent_metric import AgentJudgeAdapter
from judges.pass_fail_fit import JudgeAlignmentAdapter, label_weights
from judges.types import JudgedItem

COMPONENT = "instructions"
TEACHER = "qwen2.5-coder-1.5b-instruct"
# Measured beside the library's templates ("paper", "rewrite"), not shipped
# (docs/benchmarks: why). Each shows the current text unfenced; KINDS_FENCED is the fenced
# twin of KINDS.
C, E = CURRENT_INSTRUCTIONS, EXAMPLES

RULES = f"""An assistant was given this instruction:

{C}

Below are inputs it received, the outputs it gave, and feedback on each output (whether it was right, and if not, what was expected):

{E}

Write an improved instruction: the current instruction, then one short rule for each kind of mistake in the feedback, as a line "- <what such inputs are like>: <the expected output>". A rule is about a kind of input in general, not about one input above. Keep the task and the form of the output. Write only the improved instruction."""  # noqa: E501

DIAGNOSE = f"""I gave an assistant this instruction:

{C}

Below are inputs it received, the outputs it gave, and feedback on each output (whether it was right, and if not, what was expected):

{E}

Say in a few words what went wrong, then write a new instruction that fixes it. Use this format:

Problems:
- (at most three short lines)

New instruction:
```
(the whole new instruction: the same task and form of output, plus what the assistant must know to give the expected output for inputs like these)
```"""  # noqa: E501

KINDS = f"""Rewrite this instruction so that an assistant following it would have given the expected output for each input below.

Instruction:
{C}

Inputs, the outputs the assistant gave, and feedback on each (whether it was right, and if not, what was expected):

{E}

Reply with the rewritten instruction only. Keep its task and the form of its output, and add what the assistant needed to know: how to tell such inputs apart in general, and which output each kind of input expects."""  # noqa: E501

# The same with the instruction fenced, as the paper's template shows it.
KINDS_FENCED = KINDS.replace(f"Instruction:\n{C}\n", f"Instruction:\n```\n{C}\n```\n")

VARIANTS = {
    "rules": RULES,
    "diagnose": DIAGNOSE,
    "kinds": KINDS,
    "kinds_fenced": KINDS_FENCED,
}
TEMPLATES = REFLECTION_TEMPLATES | VARIANTS


@dataclass
class CommentJudge:
    """The night's judge as the annotator: their label is the verdict and their comment
    the rationale (the night's judge writes its rationale in the same place)."""

    comments: dict[str, str]

    async def p_pass_many(self, items: list[JudgedItem]) -> list[float | None]:
        raise AssertionError("the replies are scored by their human labels")

    async def rationale(self, item: JudgedItem) -> str:
        return self.comments[item.id]

    def passes(self, score: float) -> bool:
        return score >= 0.5


def traces(collected: Collected) -> tuple[list[Example], dict[str, float], dict[str, str]]:
    """The labelled traces with a reply as logged, their human scores and comments."""
    examples, _ = labelled(collected)
    human = {item.id: item for item in collected.items}
    examples = [ex for ex in examples if ex.id in collected.outputs]
    scores = {ex.id: float(bool(human[ex.id].human_pass)) for ex in examples}
    comments = {ex.id: human[ex.id].human_comment for ex in examples}
    return examples, scores, comments


async def reflective_records(
    adapter: AgentJudgeAdapter,
    batch: list[Example],
    outputs: dict[str, str],
    scores: dict[str, float],
) -> list[dict[str, Any]]:
    """The records the night's adapter builds for the seed prompts on `batch`."""
    agent = IntentRouter()
    rollouts = [
        Rollout(
            example=ex,
            prompts=dict(SEED_PROMPTS),
            output=outputs[ex.id],
            messages=agent.messages(ex, SEED_PROMPTS),
            score=scores[ex.id],
        )
        for ex in batch
    ]
    evaluation = EvaluationBatch(
        outputs=[r.output for r in rollouts],
        scores=[float(r.score or 0.0) for r in rollouts],
        trajectories=rollouts,
    )
    dataset = await adapter.make_reflective_dataset(dict(SEED_PROMPTS), evaluation, [COMPONENT])
    return dataset[COMPONENT]


def minibatches(examples: list[Example], n: int, size: int, seed: int) -> list[list[Example]]:
    """N minibatches, each drawn by its own RNG, so a larger N keeps the first ones."""
    ordered = sorted(examples, key=lambda ex: ex.id)
    return [random.Random(f"{seed}:{i}").sample(ordered, size) for i in range(n)]


async def reflect_all(
    teacher: Any,
    current: str,
    records: list[list[dict[str, Any]]],
    batches: list[list[str]],
    args: argparse.Namespace,
    max_tokens: int,
    have: set[tuple[str, int]] = frozenset(),  # type: ignore[assignment]
) -> list[dict[str, Any]]:
    """Each template's reply on each minibatch's records, the i-th with sampling seed i,
    but those it `have`s already."""
    jobs = [
        (name, i, build_reflection_prompt(TEMPLATES[name], current, r))
        for name in args.templates
        for i, r in enumerate(records)
        if (name, i) not in have
    ]

    async def one(name: str, i: int, prompt: str) -> dict[str, Any]:
        reply = await reflection_lm(teacher, max_tokens, seed=args.seed * 1000 + i)(prompt)
        done = {"template": name, "i": i, "minibatch": batches[i], "reply": reply}
        with open(f"{args.out}.partial", "a") as partial:  # what a killed run leaves
            partial.write(json.dumps(done) + "\n")
        return done

    start = time.monotonic()
    out = list(await asyncio.gather(*(one(*job) for job in jobs)))
    seconds = time.monotonic() - start
    if jobs:
        print(f"{len(jobs)} reflections in {seconds:.0f} s ({seconds / len(jobs):.1f} s each)")
    return out


async def propose(
    args: argparse.Namespace, have: set[tuple[str, int]], judge: bool
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every template's N replies on the router's instructions (but those it `have`s), and
    with `judge` `--judge` replies on its judge's rubric, from one teacher."""
    agent = IntentRouter()
    collected = collect(JsonlTraceSource().fetch(None, 10_000), agent, "correct")
    examples, scores, comments = traces(collected)
    adapter = AgentJudgeAdapter(agent, lm=None, judge=CommentJudge(comments))  # type: ignore[arg-type]
    batches = minibatches(examples, args.n, args.minibatch, args.seed)
    records = [await reflective_records(adapter, b, collected.outputs, scores) for b in batches]
    failing = [sum(scores[ex.id] < 0.5 for ex in b) for b in batches]
    print(
        f"{len(examples)} labelled traces; {args.n} minibatches of {args.minibatch} "
        f"({fmean(failing or [0]):.1f} failing on average)"
    )
    start = time.monotonic()
    teacher = make_lm(LMSettings(model_path=args.teacher, max_batch_size=args.batch))
    print(f"teacher {args.teacher} loaded in {time.monotonic() - start:.0f} s")
    ids = [[ex.id for ex in b] for b in batches]
    current = SEED_PROMPTS[COMPONENT]
    out = await reflect_all(teacher, current, records, ids, args, args.max_tokens, have)
    rubric = await judge_proposals(teacher, collected, args) if judge else []
    close = getattr(teacher, "close", None)
    if close is not None:
        close()
    del teacher
    gc.collect()
    return out, rubric


async def judge_proposals(
    teacher: Any, collected: Collected, args: argparse.Namespace
) -> list[dict[str, Any]]:
    """Rubric proposals for the router's judge, as its alignment reflects: the teacher
    judges a minibatch of the labelled traces with the seed rubric (P(pass) and its reason,
    `judges.pass_fail_fit`), and each template reflects on those records with the judge's
    reflection budget (`JudgeSettings.reflection_max_tokens`)."""
    items = sorted((i for i in collected.items if i.human_pass is not None), key=lambda i: i.id)
    adapter = JudgeAlignmentAdapter(teacher, label_weights(items))
    seed = {"rubric": IntentRouter().judge_rubric}
    batches = [random.Random(f"judge:{args.seed}:{i}").sample(items, args.minibatch)
               for i in range(args.judge)]  # fmt: skip
    start = time.monotonic()
    records = []
    for batch in batches:
        evaluation = await adapter.evaluate(batch, seed, capture_traces=True)
        records.append(
            (await adapter.make_reflective_dataset(seed, evaluation, ["rubric"]))["rubric"]
        )
    seconds = time.monotonic() - start
    print(f"the judge's verdicts and reasons on {args.judge} minibatches in {seconds:.0f} s")
    ids = [[i.id for i in b] for b in batches]
    max_tokens = JudgeSettings().reflection_max_tokens
    out = await reflect_all(teacher, seed["rubric"], records, ids, args, max_tokens)
    for p in out:
        text = extract_proposal(p["reply"])
        p |= {
            "text": text,
            "differs": bool(text) and normalized(text) != normalized(seed["rubric"]),
            "usable": bool(text)
            and not restates_meta_prompt(text, TEMPLATES[p["template"]], seed["rubric"]),
            "a_rubric": any(w in text.lower() for w in ("pass", "fail")),
        }
    return out


def rubric_table(proposals: list[dict[str, Any]], templates: list[str]) -> None:
    """The judge's side: no held-out number (agreement needs the teacher on every label),
    but whether each template's proposals are rubrics at all."""
    print(f"\nrubric {'template':<10} {'N':>3} {'differ':>7} {'usable':>7} {'a rubric':>9}")
    for name in templates:
        mine = [p for p in proposals if p["template"] == name]
        print(
            f"rubric {name:<10} {len(mine):>3} {sum(p['differs'] for p in mine):>7} "
            f"{sum(p['usable'] for p in mine):>7} {sum(p['a_rubric'] for p in mine):>9}"
        )
    print("a rubric: still judges replies (says what passes or fails)")
    for p in proposals:
        print(f"  {p['template']:<9} #{p['i']} {normalized(p['text'])[:160]!r}")


def normalized(text: str) -> str:
    return " ".join(text.split())


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z']+", text.lower()))


def judge_proposal(name: str, reply: str) -> dict[str, Any]:
    """What the engine would make of one reply: its text, and whether it is a candidate."""
    seed = SEED_PROMPTS[COMPONENT]
    text = extract_proposal(reply)
    restates = bool(text) and restates_meta_prompt(text, TEMPLATES[name], seed)
    addresses = bool(text) and addresses_judge(text, seed) is not None
    return {
        "text": text,
        "differs": bool(text) and normalized(text) != normalized(seed),
        "new_words": len(words(text) - words(seed)),
        "usable": bool(text) and not restates and not addresses,
        "restates": restates,
        "addresses_judge": addresses,
    }


def heldout(per_intent: int) -> list[Example]:
    """The held-out requests, or the first `per_intent` of each intent."""
    test = load_heldout(HELDOUT)
    if not per_intent:
        return test
    seen: Counter[str | None] = Counter()
    kept = []
    for ex in test:
        seen[ex.reference] += 1
        if seen[ex.reference] <= per_intent:
            kept.append(ex)
    return kept


async def score(
    proposals: list[dict[str, Any]], args: argparse.Namespace, done: dict[str, float]
) -> float:
    """Held-out accuracy of each distinct candidate text, in place (`done`: those known,
    the seed's under ""); the seed's returned."""
    test = heldout(args.heldout)
    todo = {p["text"] for p in proposals if p["usable"] and p["differs"]} - set(done)
    if todo or "" not in done:
        agent, lm = IntentRouter(), make_lm(LMSettings())
    max_tokens = AgentOptSettings().max_tokens
    if "" not in done:
        done[""] = fmean(await accuracy_of(agent, lm, dict(SEED_PROMPTS), test, max_tokens))
    seed = done[""]
    print(f"seed prompts: held-out accuracy {seed:.3f} on {len(test)} requests")
    for p in proposals:
        if not (p["usable"] and p["differs"]):
            continue
        if p["text"] not in done:
            start = time.monotonic()
            prompts = dict(SEED_PROMPTS) | {COMPONENT: p["text"]}
            done[p["text"]] = fmean(await accuracy_of(agent, lm, prompts, test, max_tokens))
            print(
                f"  {p['template']:<9} #{p['i']:<2} {done[p['text']]:.3f} "
                f"({time.monotonic() - start:.0f} s) {normalized(p['text'])[:90]!r}"
            )
        p["accuracy"] = done[p["text"]]
    return seed


def table(proposals: list[dict[str, Any]], templates: list[str], seed: float) -> None:
    print(
        f"\n{'template':<10} {'N':>3} {'differ':>7} {'+3 words':>8} {'usable':>7} {'cand.':>6} "
        f"{'beat seed':>9} {'mean cand.':>10} {'mean all':>9} {'best':>6}"
    )
    for name in templates:
        mine = [p for p in proposals if p["template"] == name]
        cands = [p for p in mine if p["usable"] and p["differs"]]
        accs = [p["accuracy"] for p in cands]
        all_accs = [p.get("accuracy", seed) for p in mine]
        print(
            f"{name:<10} {len(mine):>3} {sum(p['differs'] for p in mine):>7} "
            f"{sum(p['new_words'] >= 3 for p in mine):>8} "
            f"{sum(p['usable'] for p in mine):>7} {len(cands):>6} "
            f"{sum(a > seed for a in accs):>9} "
            f"{(f'{fmean(accs):.3f}' if accs else '-'):>10} {fmean(all_accs):>9.3f} "
            f"{(f'{max(accs):.3f}' if accs else '-'):>6}"
        )
    print(
        f"seed {seed:.3f}. differ: not the parent's text (whitespace aside); +3 words: at "
        "least 3 words the parent lacks; usable: non-empty, no restated "
        "meta-prompt, not addressing the judge; cand.: both (what the engine evaluates); "
        "mean all: a non-candidate at the seed's accuracy."
    )


async def main(args: argparse.Namespace) -> None:
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    print(next((line for line in cpu.splitlines() if line.startswith("Model name")), "CPU ?"))
    out = Path(args.out)
    saved = json.loads(out.read_text()) if args.reuse and out.exists() else {}
    replies, rubric = saved.get("replies", []), saved.get("rubric", [])
    have = {(r["template"], r["i"]) for r in replies}
    wanted = {(name, i) for name in args.templates for i in range(args.n)}
    if wanted - have or (args.judge and not rubric):
        new, new_rubric = await propose(args, have, judge=bool(args.judge and not rubric))
        replies, rubric = replies + new, rubric or new_rubric
        out.write_text(json.dumps(saved | {"replies": replies, "rubric": rubric}, indent=1))
    if rubric:
        rubric_table([r for r in rubric if r["template"] in args.templates], args.templates)
    replies = [r for r in replies if (r["template"], r["i"]) in wanted]
    if not replies:
        return
    proposals = [r | judge_proposal(r["template"], r["reply"]) for r in replies]
    # accuracies are kept per held-out set: the seed's under ""
    accuracies = saved.get("accuracies", {}).setdefault(str(args.heldout), {})
    seed = await score(proposals, args, accuracies)
    saved = json.loads(out.read_text()) if out.exists() else {}
    saved.setdefault("accuracies", {})[str(args.heldout)] = accuracies
    out.write_text(json.dumps(saved | {"replies": saved.get("replies", replies)}, indent=1))
    table(proposals, args.templates, seed)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--templates", nargs="+", default=list(TEMPLATES), choices=list(TEMPLATES))
    parser.add_argument("--n", type=int, default=12, help="proposals per template")
    parser.add_argument(
        "--minibatch", type=int, default=AgentOptSettings().reflection_minibatch_size
    )
    parser.add_argument("--max-tokens", type=int, default=AgentOptSettings().reflection_max_tokens)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--teacher", default=TEACHER)
    parser.add_argument("--batch", type=int, default=8, help="the teacher's max batch size")
    parser.add_argument(
        "--heldout",
        type=int,
        default=0,
        help="the first K held-out requests of each intent (0: all)",
    )
    parser.add_argument("--judge", type=int, default=0, help="rubric proposals per template")
    parser.add_argument("--out", default="reflection_templates.json")
    parser.add_argument("--reuse", action="store_true", help="score the replies in --out")
    asyncio.run(main(parser.parse_args()))
