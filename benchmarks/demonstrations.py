"""Demonstrations GEPA draws from corrected traces (`gepa_opt.Demonstrations`) on the demo
router, against its seed prompts and against a fixed two-per-kind set: held-out accuracy.

Data: the demo export's labelled traces (`infra/traces/demo_data`), read as the night reads
them (`flows.night.collect.collect`). Each has a true label, from its annotation's comment
("expected X; ..." or "correct: X"), which the metric needs. The reply it should have had
(the pool's target) is a passing trace's own reply, or a failing one's CORRECTION (a score
named "output"); the failing traces with neither have none here (the night's teacher
writes theirs from the comment). Split by the run's seed as the night splits (`pareto` val
traces, like `agent_opt.pareto_size`; the rest train), the pool drawn from the train
traces only, so no val trace's answer is shown. Test: `heldout.jsonl`, 140 SNIPS requests
no trace holds.

Arms, each with the seed instructions, on the real 135M agent (`make_lm(LMSettings())`,
greedy, `agent_opt.max_tokens`), scored by the true label:
  seed   the seed's example turn;
  fixed  two pool demonstrations per kind, drawn by the seed (what lifted accuracy to 0.49
         in ../shared/MEASURED.md);
  gepa   the `examples` component alone (the instructions held at the seed's), from the
         seed's, by GEPA with `Demonstrations` (no reflection model) at the night's GEPA
         knobs and a night's budget, judged by true-label accuracy on train/val.
Each arm's held-out accuracy comes with a percentile bootstrap 95% interval over the
held-out requests, and gepa's gain over the others with a paired one.

    .venv/bin/python -m benchmarks.demonstrations [--budget 160] [--seeds 0] [--pareto 20]
        [--max-tokens 256]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
import subprocess
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from statistics import fmean
from typing import Any

from benchmarks.intent_task import HELDOUT
from flows.night.collect import Collected, collect, load_heldout
from gepa_opt import Demo, Demonstrations, EvaluationBatch, GEPAConfig, optimize
from infra.agents.intent_router import LABELS, SEED_PROMPTS, IntentRouter
from infra.lm import LM
from infra.lm.factory import make_lm
from infra.settings import AgentOptSettings, LMSettings
from infra.traces.jsonl import JsonlTraceSource
from infra.types import Example
from judges.types import render_inputs

INTENT_OF_WORD = {word: intent for intent, word in LABELS.items()}
COMMENT = re.compile(r"^(?:expected|correct:)\s+(\w+)")


def labelled(collected: Collected) -> tuple[list[Example], dict[str, str]]:
    """The labelled traces as examples with their true intent, and per trace the reply it
    should have had where the night knows one (passed as logged, or corrected)."""
    examples = {ex.id: ex for ex in collected.examples}
    out, targets = [], {}
    for item in sorted(collected.items, key=lambda i: i.id):
        match = COMMENT.match(item.human_comment)
        if match is None or item.id not in examples:
            continue
        out.append(replace(examples[item.id], reference=INTENT_OF_WORD[match.group(1)]))
        if item.human_pass:
            targets[item.id] = collected.outputs[item.id]
        elif item.id in collected.corrections:
            targets[item.id] = collected.corrections[item.id]
    return out, targets


def split(examples: list[Example], pareto: int, seed: int) -> tuple[list[Example], list[Example]]:
    """(train, val) as `flows.night.stages.split_examples` cuts the night's traffic."""
    shuffled = sorted(examples, key=lambda e: e.id)
    random.Random(seed).shuffle(shuffled)
    return shuffled[pareto:], shuffled[:pareto]


def pool_of(agent: IntentRouter, train: list[Example], targets: dict[str, str]) -> tuple[Demo, ...]:
    """One demonstration per train trace with a target the agent can write as one."""
    return tuple(
        Demo(render_inputs(ex.inputs), line)
        for ex in train
        if ex.id in targets and (line := agent.demonstration(ex, targets[ex.id]))
    )


def fixed_set(pool: Sequence[Demo], per_kind: int, seed: int) -> str:
    """`per_kind` pool demonstrations of each kind, drawn by `seed`."""
    rng = random.Random(f"fixed:{seed}")
    by_kind: dict[str, list[str]] = {}
    for demo in pool:
        by_kind.setdefault(demo.text.rsplit("=> ", 1)[1], []).append(demo.text)
    lines = [
        line
        for kind in sorted(by_kind)
        for line in rng.sample(by_kind[kind], min(per_kind, len(by_kind[kind])))
    ]
    return "\n".join(lines)


@dataclass
class TrueLabelAdapter:
    """The agent with the fixed instructions and the candidate's example turns, scored 1 if
    the first kind its reply names is the true one."""

    agent: IntentRouter
    lm: LM
    max_tokens: int

    async def evaluate(
        self, batch: list[Example], candidate: dict[str, str], capture_traces: bool = False
    ) -> EvaluationBatch:
        scores = await accuracy_of(
            self.agent, self.lm, SEED_PROMPTS | candidate, batch, self.max_tokens
        )
        return EvaluationBatch(
            outputs=[None] * len(batch),
            scores=scores,
            trajectories=[None] * len(batch) if capture_traces else None,
        )

    async def make_reflective_dataset(
        self, candidate: dict[str, str], eval_batch: EvaluationBatch, components: list[str]
    ) -> dict[str, list[dict[str, Any]]]:
        raise AssertionError(f"{components} reflected on: only demonstrations are optimized")


async def accuracy_of(
    agent: IntentRouter, lm: LM, prompts: dict[str, str], examples: list[Example], max_tokens: int
) -> list[float]:
    rollouts = await asyncio.gather(
        *(agent.run(ex, prompts, lm, max_tokens=max_tokens, temperature=0.0) for ex in examples)
    )
    return [
        float(agent.reference_score(ex, r.output)) for ex, r in zip(examples, rollouts, strict=True)
    ]


async def no_reflection(prompt: str) -> str:
    raise AssertionError("a reflection call: the demonstrations need none")


def interval(per_seed: Sequence[Sequence[float]], resamples: int = 2000) -> tuple[float, ...]:
    """The mean over seeds of each seed's mean, and its percentile bootstrap 95% interval
    from resampling the held-out requests within each seed."""
    rng = random.Random(0)
    draws = sorted(
        fmean(fmean(rng.choices(s, k=len(s))) for s in per_seed) for _ in range(resamples)
    )
    mean = fmean(fmean(s) for s in per_seed)
    return mean, draws[int(0.025 * resamples)], draws[int(0.975 * resamples) - 1]


def report(arms: dict[str, list[list[float]]]) -> None:
    """Each arm's accuracy, and gepa's paired gain over the others."""
    for name, per_seed in arms.items():
        line = "  {:<6} {:.3f} [{:.3f}, {:.3f}]".format(name, *interval(per_seed))
        if name == "gepa":
            for other in ("seed", "fixed"):
                gains = [
                    [a - b for a, b in zip(mine, theirs, strict=True)]
                    for mine, theirs in zip(per_seed, arms[other], strict=True)
                ]
                line += "   vs {}: {:+.3f} [{:+.3f}, {:+.3f}]".format(other, *interval(gains))
        print(line)


class HeldOut:
    """Each prompt's held-out scores, computed once (the arms of several seeds share some)."""

    def __init__(self, lm: LM, max_tokens: int) -> None:
        self.lm, self.max_tokens = lm, max_tokens
        self.test = load_heldout(HELDOUT)
        self._scores: dict[tuple[str, ...], list[float]] = {}

    async def scores(self, agent: IntentRouter, prompts: dict[str, str]) -> list[float]:
        key = tuple(sorted(prompts.items()))
        if key not in self._scores:
            self._scores[key] = await accuracy_of(
                agent, self.lm, prompts, self.test, self.max_tokens
            )
        return self._scores[key]


async def run_seed(
    args: argparse.Namespace, seed: int, lm: LM, heldout: HeldOut
) -> dict[str, list[float]]:
    """Each arm's held-out scores for one seed (its split, fixed set and GEPA run)."""
    agent, opt = IntentRouter(), AgentOptSettings()
    examples, targets = labelled(collect(JsonlTraceSource().fetch(None, 10_000), agent, "correct"))
    train, val = split(examples, args.pareto, seed)
    pool = pool_of(agent, train, targets)
    kinds = Counter(demo.text.rsplit("=> ", 1)[1] for demo in pool)
    print(
        f"seed {seed}: {len(examples)} labelled traces, train {len(train)}, val {len(val)}, "
        f"pool {len(pool)} demonstrations ("
        + ", ".join(f"{kind} {n}" for kind, n in sorted(kinds.items()))
        + ")"
    )
    demos = Demonstrations(
        "examples", pool, max_tokens=args.max_tokens, request_of=lambda ex: render_inputs(ex.inputs)
    )
    config = GEPAConfig(**opt.gepa_fields() | {"max_metric_calls": args.budget, "seed": seed})
    result = await optimize(
        {"examples": SEED_PROMPTS["examples"]},
        train,
        val,
        TrueLabelAdapter(agent, lm, opt.max_tokens),
        no_reflection,
        config,
        example_id=lambda ex: ex.id,
        demonstrations=demos,
    )
    best = result.best_candidate["examples"]
    seed_val = result.val_aggregate_scores[0]
    rejections = ", ".join(f"{reason.value} {n}" for reason, n in result.rejections.items())
    print(
        f"  gepa: {result.metric_calls_used} metric calls, {result.reflection_calls} "
        f"reflections, {len(result.candidates)} candidates, val {seed_val:.3f} -> "
        f"{result.best_score:.3f}; rejected: {rejections}; best shows "
        f"{len(best.splitlines())} demonstrations, ~{demos.count_tokens(best)} tokens"
    )
    arms = {
        "seed": SEED_PROMPTS,
        "fixed": SEED_PROMPTS | {"examples": fixed_set(pool, 2, seed)},
        "gepa": SEED_PROMPTS | {"examples": best},
    }
    scores = {name: await heldout.scores(agent, prompts) for name, prompts in arms.items()}
    print(f"  held-out accuracy on {len(heldout.test)} requests, mean [bootstrap 95%]:")
    report({name: [arm] for name, arm in scores.items()})
    print("  gepa's demonstrations:\n    " + best.replace("\n", "\n    "))
    return scores


async def main(args: argparse.Namespace) -> None:
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    print(next((line for line in cpu.splitlines() if line.startswith("Model name")), "CPU ?"))
    lm = make_lm(LMSettings())
    heldout = HeldOut(lm, AgentOptSettings().max_tokens)
    runs = [await run_seed(args, seed, lm, heldout) for seed in args.seeds]
    if len(runs) > 1:
        print(f"over seeds {args.seeds}, mean of the seeds' accuracies [bootstrap 95%]:")
        report({name: [run[name] for run in runs] for name in runs[0]})


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=int, default=160, help="GEPA's metric calls")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--pareto", type=int, default=AgentOptSettings().pareto_size)
    parser.add_argument("--max-tokens", type=int, default=256, help="the component's budget")
    asyncio.run(main(parser.parse_args()))
