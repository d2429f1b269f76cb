"""Fast-slow schedules side by side on the demo task (`make bench-fast-slow`).

Each arm is one `fast_slow.schedule` run by the product's own runner
(`flows.night.schedule.Schedule`) on the demo traces, the local model and one judge, with
the same total budget: `--metric-calls` GEPA metric calls split across its prompt steps,
`--train-steps` optimizer steps across its weight steps. Steps are chosen on the held-out
selection slice (true labels), as a night chooses them; each arm's final state is then
scored on the other held-out slice, which no arm saw. Per arm: that true-label accuracy
(mean over seeds), its gain over the seed state with a paired bootstrap interval (examples
resampled within each seed), the steps kept, and wall seconds and peak RSS per step.

The judge is the one a first night runs on: aligned on the demo's labels as the night
aligns it (on the night's judge model, the embedded teacher unless the settings name
another), its reward head fitted, gated on held-out labels; the teacher's corrections of
commented failing replies are kept where that judge passes them, and every weight step
trains on them beside people's, as a night's do. It is built once, for every arm and seed.

Arms sharing a prefix (p, p -> w, and p -> w with FST share their first step) compute it
once per seed: a step's result is cached by its start state, kind, budget and front.

    .venv/bin/python -m benchmarks.fast_slow [--seeds 0 1 2] [--arms p "p -> w" ...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from statistics import fmean, stdev
from typing import TYPE_CHECKING

from benchmarks.demo import MemorySampler

if TYPE_CHECKING:  # imported where used: the settings' environment comes first
    from judges.choose import JudgeGate
    from judges.judge import Judge

ARMS = {  # name -> (fast_slow.schedule, fst, lora.method); "seed" runs no step
    "seed": ("", False, "sft"),
    "p": ("p", False, "sft"),
    "w": ("w", False, "sft"),
    "p -> w": ("p -> w", False, "sft"),
    "p -> w -> p": ("p -> w -> p", False, "sft"),
    "p -> w (FST)": ("p -> w", True, "sft"),
    "w (GRPO)": ("w", False, "grpo"),  # optional; slow on a CPU, so not a default arm
}
DEFAULT_ARMS = [arm for arm in ARMS if arm != "w (GRPO)"]


@dataclass
class StepRun:
    kind: str
    kept: bool
    before: float | None
    after: float | None
    seconds: float  # when computed (a cached step keeps its first run's figures)
    peak_mib: float


@dataclass
class ArmResult:
    arm: str
    seed: int
    accuracy: float  # the final state's true-label accuracy on the gate slice
    scores: dict[str, float]  # per gate example
    steps: list[StepRun] = field(default_factory=list)


class CachedTasks:
    """The schedule's step functions (Prefect's tasks' plain functions), each result kept by
    what determines it, with the wall time and peak memory of its one real run."""

    def __init__(self, sampler: MemorySampler):
        from flows.night.schedule import evaluate_heldout, lora_round, optimize_prompts

        self.sampler = sampler
        self._fns = {"p": optimize_prompts.fn, "w": lora_round.fn, "eval": evaluate_heldout.fn}
        self.results: dict[str, object] = {}
        self.figures: dict[str, tuple[float, float]] = {}  # key -> (seconds, peak MiB)
        self.by_step: dict[int, tuple[float, float]] = {}  # the running arm's, per step

    async def _cached(self, kind: str, key: str, *args):
        if key not in self.results:
            began = time.time()
            self.results[key] = await self._fns[kind](*args)
            end = time.time()
            self.figures[key] = (end - began, self.sampler.peak(began, end) / 2**20)
        return self.results[key]

    @staticmethod
    def _key(*parts) -> str:
        return json.dumps(parts, sort_keys=True, default=repr)

    async def prompts(self, rt, run_id, step, collected, start, judge, cfg, *rest):
        key = self._key("p", rt.settings.seed, start, cfg.model_dump())
        args = (rt, run_id, step, collected, start, judge, cfg, *rest)
        result = await self._cached("p", key, *args)
        self.by_step[step] = self.figures[key]
        return result

    async def weights(self, rt, run_id, step, collected, start, judge, cfg, front, *rest):
        key = self._key("w", rt.settings.seed, start, cfg.model_dump(), front)
        args = (rt, run_id, step, collected, start, judge, cfg, front, *rest)
        result = await self._cached("w", key, *args)
        self.by_step[step] = self.figures[key]
        return result

    async def evaluate(self, rt, run_id, label, state, judge, examples):
        key = self._key("eval", rt.settings.seed, state, sorted(e.id for e in examples))
        return await self._cached("eval", key, rt, run_id, label, state, judge, examples)


async def nights_judge(rt) -> tuple[JudgeGate, dict[str, str]]:
    """The judge a first night runs on (its gate, with agreement and trust) and the
    teacher's corrections it keeps, from the night's own stages."""
    from flows.nightly import (
        align_judge,
        collect_traces,
        gate_judge,
        train_judge_adapter,
        train_judge_head,
        write_corrections,
    )

    run_id = "fs-judge"
    collected = await collect_traces.fn(rt, run_id)
    aligned = await align_judge.fn(rt, run_id, collected)
    aligned, lora = await train_judge_adapter.fn(rt, run_id, aligned, collected)
    aligned, _ = await train_judge_head.fn(rt, run_id, aligned, lora, collected)
    gate = await gate_judge.fn(rt, run_id, aligned, collected, None)
    if not rt.settings.corrections.enabled:
        return gate, {}
    written = await write_corrections.fn(rt, run_id, collected, gate.judge)
    return gate, written.kept


async def run_seed(
    seed: int, args, rt, tasks: CachedTasks, judge: Judge, written: dict[str, str]
) -> list[ArmResult]:
    from flows.night.clock import StageClock
    from flows.night.fast_slow import NightState, split_heldout
    from flows.night.schedule import Schedule, StepTasks
    from flows.nightly import collect_traces

    base = rt.settings.knobs()
    knobs = base.model_copy(update={"seed": seed})
    rt = rt.with_knobs(knobs)
    collected = replace(await collect_traces.fn(rt, f"fs-{seed}"), written=written)
    heldout = rt.heldout_examples(collected.heldout)
    selection, gate = split_heldout(heldout, rt.settings.fast_slow.selection_share, seed)
    start = NightState(rt.agent.seed_prompts(), None)
    step_tasks = StepTasks(tasks.prompts, tasks.weights, tasks.evaluate)
    out = []
    for arm in args.arms:
        schedule, fst, method = ARMS[arm]
        print(f"... seed {seed}, arm {arm}", flush=True)
        steps, best = [], start
        tasks.by_step = {}
        if schedule:
            cfg = knobs.fast_slow.model_copy(update={"schedule": schedule, "fst": fst})
            lora = knobs.lora.model_copy(update={"method": method})
            arm_rt = rt.with_knobs(knobs.model_copy(update={"fast_slow": cfg, "lora": lora}))
            run_id = f"fs-{seed}-" + "".join(c for c in arm if c.isalnum()).lower()
            runner = Schedule(  # its own run id: its own GEPA and adapter folders
                arm_rt, run_id, StageClock(), collected, judge, selection, start,
                tasks=step_tasks,
            )  # fmt: skip
            done = await runner.run()
            steps = [_step_run(s, tasks.by_step) for s in done]
            best = runner.best
        final = await tasks.evaluate(rt, f"fs-{seed}", "gate", best, judge, gate)
        out.append(ArmResult(arm, seed, final.accuracy or 0.0, final.scores, steps))
        kept = " ".join(f"{s.kind}{'+' if s.kept else '-'}" for s in steps) or "-"
        print(f"    seed {seed}, {arm}: accuracy {out[-1].accuracy:.3f}, steps {kept}", flush=True)
    return out


def _step_run(step, figures: dict[int, tuple[float, float]]) -> StepRun:
    """A step's decision with the figures of its one real run."""
    seconds, peak = figures.get(step.index, (0.0, 0.0))
    d = step.decision
    return StepRun(step.kind, d.kept, d.before, d.after, seconds, peak)


def bootstrap_gain(results: list[ArmResult], base: list[ArmResult], resamples: int = 2000):
    """Mean over seeds of the arm's gain over the seed state, with a percentile interval
    from resampling the gate examples within each seed (paired)."""
    pairs = []
    for arm, seed in zip(results, base, strict=True):
        ids = sorted(set(arm.scores) & set(seed.scores))
        pairs.append([arm.scores[i] - seed.scores[i] for i in ids])
    gain = fmean(fmean(p) for p in pairs if p)
    rng = random.Random(0)
    draws = sorted(
        fmean(fmean(rng.choices(p, k=len(p))) for p in pairs if p) for _ in range(resamples)
    )
    return gain, draws[int(0.025 * resamples)], draws[int(0.975 * resamples) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--arms", nargs="+", default=DEFAULT_ARMS, choices=list(ARMS))
    parser.add_argument("--metric-calls", type=int, default=160, help="GEPA's, per arm")
    parser.add_argument("--train-steps", type=int, default=8, help="LoRA steps, per arm")
    parser.add_argument("--json", help="write every arm's result here")
    args = parser.parse_args()
    if "seed" not in args.arms:
        args.arms = ["seed", *args.arms]
    state = Path(tempfile.mkdtemp(prefix="flywheel-fast-slow-"))
    os.environ["FLYWHEEL_STATE_DIR"] = str(state)

    from flows.night.runtime import Runtime
    from flows.plumbing.environment import prepare_environment
    from infra.settings import Settings

    settings = Settings(
        agent_opt={"max_metric_calls": args.metric_calls},
        lora={"max_steps": args.train_steps},
    )
    prepare_environment(settings.state_dir)
    rt = Runtime(settings)
    sampler = MemorySampler()
    sampler.start()
    tasks = CachedTasks(sampler)
    gate, written = asyncio.run(nights_judge(rt))
    print(
        f"judge: {gate.judge.label}, held-out {gate.judge.primary} "
        f"{gate.judge.heldout_score:.3f}, "
        f"{'trusted' if gate.trusted else 'NOT trusted'}; {len(written)} teacher corrections kept",
        flush=True,
    )
    results: list[ArmResult] = []
    for seed in args.seeds:
        results += asyncio.run(run_seed(seed, args, rt, tasks, gate.judge, written))
    sampler.stop()
    report(results, args)
    if args.json:
        Path(args.json).write_text(json.dumps([r.__dict__ for r in results], default=vars))


def report(results: list[ArmResult], args) -> None:
    by_arm = {arm: [r for r in results if r.arm == arm] for arm in args.arms}
    base = by_arm["seed"]
    print(
        f"\nfast-slow on the demo task: {args.metric_calls} GEPA metric calls and "
        f"{args.train_steps} LoRA steps per arm, seeds {args.seeds}; accuracy on the held-out "
        "gate slice (true labels)"
    )
    print(f"{'arm':<16}{'accuracy':>16}{'gain over seed [95% CI]':>30}  steps kept (per seed)")
    for arm, rows in by_arm.items():
        accs = [r.accuracy for r in rows]
        sd = stdev(accs) if len(accs) > 1 else 0.0
        gain = (
            ""
            if arm == "seed"
            else "{:+.3f} [{:+.3f}, {:+.3f}]".format(*bootstrap_gain(rows, base))
        )
        kept = " | ".join(
            " ".join(f"{s.kind}{'+' if s.kept else '-'}" for s in r.steps) or "-" for r in rows
        )
        print(f"{arm:<16}{fmean(accs):>9.3f} ± {sd:.3f}{gain:>30}  {kept}")
    print(f"\n{'arm':<16}{'seed':>5}  step: seconds, peak RSS MiB (first run of a shared step)")
    for r in results:
        figures = ", ".join(f"{s.kind} {s.seconds:.0f} s {s.peak_mib:.0f}" for s in r.steps)
        print(f"{r.arm:<16}{r.seed:>5}  {figures or '-'}")


if __name__ == "__main__":
    main()
