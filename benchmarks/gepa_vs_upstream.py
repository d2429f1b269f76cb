"""gepa_opt beside upstream gepa 0.1.4: time to the same quality, same task, budget, seeds.

Engines (one invocation runs them side by side):
  A  upstream gepa 0.1.4, default: one mutation per step, W-thread parallel batch evaluation
  B  upstream gepa 0.1.4, `PxNSampling(P, N)` + `BestImprovement` selection (`--shape`)
  C  gepa_opt, `GEPAConfig(proposal_shape=--shape, max_concurrency=W)`, defaults otherwise
  D  gepa_opt, `proposal_shape="auto"` (the runtime model picks and re-picks the shape)
  more gepa_opt arms with `--variant NAME=field:value,...` (GEPAConfig fields on top of
  C's), e.g. `--variant E=in_flight:fill F=parent_pruning:coverage G=use_merge:true`.

Tasks (`--task`):
  demo   the demo agent's two prompt components on the local 135M model, which is also the
         reflection LM (`benchmarks/intent_task.py`); an exact-match metric, no judge.
  depth  rule ladders found one rung per accepted generation, with a scripted reflection
         model and no LM (`benchmarks/depth_task.py`): a search that needs depth, where an
         engine that spends its proposals on siblings ends low.

Settings: `local` (calls as fast as the task runs them) and `latency` (each metric and each
reflection call first sleeps a lognormal delay, median `--median-latency` s, or
`--reflection-latency` s for reflections, sigma `--latency-sigma`: a remote API). W =
`--workers` LM-bound calls in flight, in both settings.

How upstream (synchronous) is wired: every async call runs on one event loop in a
background thread (`asyncio.run_coroutine_threadsafe`); the adapter's `batch_evaluate`
and `evaluate` fan each (candidate, example) pair out to a pool of W threads, and the
reflection LM's `batch_complete` (which upstream uses for the several reflections of a
PxN step) sends its prompts through the same pool. Its utilization is the busy
thread-seconds of that pool over W x wall seconds; gepa_opt reports its own
(`GEPAResult.worker_utilization`, slot-seconds of its W-slot pool, reflections included).

Metric calls and reflection calls are counted in the shared harness, identically for all
engines; overshoot is calls used past `--budget` (upstream checks its budget only between
steps; gepa_opt starts a proposal only if its worst case still fits). best_val is the
library's own val score of its best candidate, ref_val the referee's (below), test that
candidate on the test split (untimed), depth the generations on its lineage from the seed.

Time to quality: each engine records a timeline of (seconds since its `optimize` call,
the candidate it would return if stopped then: its own best on val), one point whenever a
candidate enters its pool: for gepa_opt at each `FrontierChanged` event (`on_event`), for
upstream at each `on_valset_evaluated` callback. Those candidates are then scored by one
referee pass on val (untimed, cached by the candidate's texts, shared by all engines:
`ref_val`), so the same text gets the same number whichever engine found it. The bar for a
setting+seed is the referee score of A's final best candidate; if that is not above the
seed's, the best referee score any engine's final candidate got (printed when so). An
engine's time to quality is the first timeline point whose candidate's referee score
reaches the bar; per setting the ratios against A and B are of the mean time to quality
over the seeds where both engines reached the bar. Since one lucky proposal decides
"reached or never" in a seed, each setting also averages every engine's referee curve over
the seeds (what it would return if stopped at t) and reads the time that mean curve first
reaches A's mean final ref_val. The floor of a seed, the earliest any engine held a
candidate beyond the seed, bounds every ratio from below; the report prints it and counts
the seeds where the target share of A's or B's time lies below it
(`benchmarks/time_to_quality.py`). `--json` writes every run, timelines and candidates
included; `--report` prints the report of such a file again.

    .venv/bin/python -m benchmarks.gepa_vs_upstream --task depth [--budget 600]
        [--seeds 0 1 2 3 4] [--settings latency] [--engines A B C D] [--workers 8]
        [--shape 2x2] [--median-latency 0.2] [--variant E=in_flight:fill] [--json runs.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from statistics import fmean
from typing import Any, Protocol

from benchmarks.depth_task import DepthTask
from benchmarks.time_to_quality import (
    Run,
    lineage_depth,
    report_group,
    report_saved,
    report_setting,
)
from gepa_opt import EvaluationBatch, FrontierChanged, GEPAConfig, GEPAEngine, ProposalShape
from gepa_opt.meta_prompt import CURRENT_INSTRUCTIONS, EXAMPLES
from gepa_opt.runtime_model import CallLatency, Schedule, predict_wall_s

BASE_ENGINES = {
    "A": "upstream 1x1",
    "B": "upstream {shape} best",
    "C": "ours {shape}",
    "D": "ours auto",
}
TASK_DEFAULTS = {  # budget, median latency (s)
    "demo": (200, 1.0),
    "depth": (600, 0.2),
}


class BenchTask(Protocol):
    """What a task gives the harness (`intent_task.IntentTask`, `depth_task.DepthTask`)."""

    name: str
    train: list[Any]
    val: list[Any]
    test: list[Any]
    seed_prompts: dict[str, str]
    templates: dict[str, str]
    """Per component, a meta-prompt in gepa_opt's placeholders (the paper's where none)."""

    def example_id(self, example: Any) -> str: ...

    async def rollout(self, example: Any, candidate: dict[str, str]) -> Any:
        """A trajectory with `.output`, `.score` (and whatever its records need)."""
        ...

    def reflective_dataset(self, trajectories: list[Any], components: list[str]) -> dict: ...

    def reflector(self, seed: int) -> Callable[[str], Awaitable[str]]: ...


def upstream_templates(templates: dict[str, str]) -> dict[str, str]:
    """The same templates in upstream's placeholders (it renders records identically)."""
    return {
        component: template.replace(CURRENT_INSTRUCTIONS, "<curr_param>").replace(
            EXAMPLES, "<side_info>"
        )
        for component, template in templates.items()
    }


# ---------------------------------------------------------------------------------------
# The harness both libraries call through
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Latency:
    """A remote API's delay: each call first sleeps a lognormal time."""

    metric_median_s: float
    reflection_median_s: float
    sigma: float

    def sample(self, rng: random.Random, reflection: bool) -> float:
        median = self.reflection_median_s if reflection else self.metric_median_s
        return rng.lognormvariate(math.log(median), self.sigma) if median > 0 else 0.0


class Harness:
    """The task's rollouts and reflections, counting what each run spends.

    All counting happens in coroutines on the one event loop, so it needs no lock.
    """

    def __init__(self, task: BenchTask, seed: int, latency: Latency | None = None):
        self.task, self.seed, self.latency = task, seed, latency
        self._rng = random.Random(f"latency:{seed}")
        self._reflect = task.reflector(seed)
        self.metric_calls = 0
        self.reflection_calls = 0
        self.metric_s = 0.0  # summed latency of each kind of call, for the runtime model
        self.reflection_s = 0.0

    async def _delay(self, reflection: bool) -> None:
        if self.latency is not None:
            await asyncio.sleep(self.latency.sample(self._rng, reflection))

    async def rollout(self, example: Any, candidate: dict[str, str]) -> Any:
        self.metric_calls += 1
        start = time.monotonic()
        await self._delay(reflection=False)
        scored = await self.task.rollout(example, candidate)
        self.metric_s += time.monotonic() - start
        return scored

    async def rollouts(self, examples: list[Any], candidate: dict[str, str]) -> list[Any]:
        return list(await asyncio.gather(*(self.rollout(x, candidate) for x in examples)))

    async def reflect(self, prompt: str) -> str:
        self.reflection_calls += 1
        start = time.monotonic()
        await self._delay(reflection=True)
        text = await self._reflect(prompt)
        self.reflection_s += time.monotonic() - start
        return text

    def measured_latency(self) -> CallLatency:
        """Mean seconds per metric and per reflection call, as this run measured them."""
        return CallLatency(
            max(1e-6, self.metric_s / max(1, self.metric_calls)),
            self.reflection_s / max(1, self.reflection_calls),
        )


class LoopThread:
    """One event loop in a background thread: every task coroutine of the benchmark runs here."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="bench-loop")
        self._thread.daemon = True
        self._thread.start()

    def run(self, coro: Awaitable[Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()


# ---------------------------------------------------------------------------------------
# gepa_opt (C, D and variants)
# ---------------------------------------------------------------------------------------


class OursAdapter:
    """`gepa_opt.Adapter` over the harness (the engine calls it one example at a time)."""

    def __init__(self, harness: Harness):
        self.harness = harness

    async def evaluate(
        self, batch: list[Any], candidate: dict[str, str], capture_traces: bool = False
    ) -> EvaluationBatch:
        scored = await self.harness.rollouts(batch, candidate)
        return EvaluationBatch(
            outputs=[s.output for s in scored],
            scores=[s.score for s in scored],
            trajectories=scored if capture_traces else None,
        )

    async def make_reflective_dataset(
        self, candidate: dict[str, str], eval_batch: EvaluationBatch, components: list[str]
    ) -> dict[str, list]:
        return self.harness.task.reflective_dataset(eval_batch.trajectories or [], components)


async def run_ours(
    harness: Harness, seed: int, budget: int, workers: int, overrides: dict[str, Any]
) -> tuple[Any, list[tuple[float, int]], float, str]:
    """(result, timeline of (seconds, best index), wall seconds, shapes used) of one run."""
    task = harness.task
    timeline: list[tuple[float, int]] = []
    start = time.monotonic()

    def on_event(event: Any) -> None:
        if isinstance(event, FrontierChanged):
            timeline.append((time.monotonic() - start, event.best_idx))

    config = GEPAConfig(
        max_metric_calls=budget,
        max_concurrency=workers,
        seed=seed,
        component_prompt_templates=task.templates,
        **overrides,
    )
    engine = GEPAEngine(
        task.seed_prompts,
        task.train,
        task.val,
        OursAdapter(harness),
        harness.reflect,
        config,
        example_id=task.example_id,
        on_event=on_event,
    )
    result = await engine.run()
    return result, timeline, time.monotonic() - start, engine.shapes_used()


# ---------------------------------------------------------------------------------------
# upstream gepa 0.1.4 (A, B)
# ---------------------------------------------------------------------------------------


class ThreadSlots:
    """W threads for upstream's LM-bound calls, and how long they were busy."""

    def __init__(self, size: int, loop: LoopThread):
        self.size, self.loop = size, loop
        self._pool = ThreadPoolExecutor(max_workers=size, thread_name_prefix="upstream-slot")
        self._lock = threading.Lock()
        self.busy_s = 0.0

    def map(self, calls: list[Callable[[], Awaitable[Any]]]) -> list[Any]:
        """Run each coroutine factory on a free thread (blocking on the loop); in order."""
        return [f.result() for f in [self._pool.submit(self._run, call) for call in calls]]

    def _run(self, call: Callable[[], Awaitable[Any]]) -> Any:
        start = time.monotonic()
        try:
            return self.loop.run(call())
        finally:
            with self._lock:
                self.busy_s += time.monotonic() - start

    def utilization(self, wall_s: float) -> float:
        return self.busy_s / (self.size * wall_s) if wall_s > 0 else 0.0

    def close(self) -> None:
        self._pool.shutdown()


class UpstreamAdapter:
    """`gepa.GEPAAdapter`: every (candidate, example) of a call goes out on the W threads."""

    propose_new_texts = None  # upstream's default proposer: the reflection LM below

    def __init__(self, harness: Harness, slots: ThreadSlots):
        self.harness, self.slots = harness, slots

    def batch_evaluate(self, items: list[tuple[dict[str, str], list[Any]]]) -> list:
        from gepa import EvaluationBatch as UpstreamBatch

        def call(candidate: dict[str, str], example: Any) -> Callable[[], Awaitable[Any]]:
            return lambda: self.harness.rollout(example, candidate)

        flat = self.slots.map([call(c, x) for c, batch in items for x in batch])
        results, at = [], 0
        for _, batch in items:
            group, at = flat[at : at + len(batch)], at + len(batch)
            results.append(
                UpstreamBatch(
                    outputs=[s.output for s in group],
                    scores=[s.score for s in group],
                    trajectories=group,
                )
            )
        return results

    def evaluate(
        self, batch: list[Any], candidate: dict[str, str], capture_traces: bool = False
    ) -> Any:
        (result,) = self.batch_evaluate([(candidate, batch)])
        if not capture_traces:
            result.trajectories = None
        return result

    def make_reflective_dataset(
        self, candidate: dict[str, str], eval_batch: Any, components_to_update: list[str]
    ) -> dict[str, list]:
        trajectories = eval_batch.trajectories or []
        return self.harness.task.reflective_dataset(trajectories, components_to_update)


class UpstreamReflectionLM:
    """Upstream's `LanguageModel` (prompt -> text), with `batch_complete` so that the
    reflections of one PxN step go out together on the W threads."""

    def __init__(self, harness: Harness, slots: ThreadSlots):
        self.harness, self.slots = harness, slots

    def __call__(self, prompt: str | list[dict[str, Any]]) -> str:
        return self.batch_complete([prompt])[0]

    def batch_complete(self, prompts: list[str | list[dict[str, Any]]]) -> list[str]:
        def call(prompt: str) -> Callable[[], Awaitable[str]]:
            return lambda: self.harness.reflect(prompt)

        return self.slots.map([call(_prompt_text(p)) for p in prompts])


def _prompt_text(prompt: str | list[dict[str, Any]]) -> str:
    """Upstream passes a string, or chat messages to `batch_complete`."""
    return prompt if isinstance(prompt, str) else str(prompt[-1]["content"])


class UpstreamTimeline:
    """Upstream callback: a timeline point each time a candidate's valset score is known,
    naming upstream's best candidate at that moment."""

    def __init__(self, start: float):
        self.start = start
        self.points: list[tuple[float, dict[str, str]]] = []

    def on_valset_evaluated(self, event: dict[str, Any]) -> None:
        best = dict(event["candidate"]) if event["is_best_program"] else self.points[-1][1]
        self.points.append((time.monotonic() - self.start, best))


class QuietLogger:
    def log(self, message: str) -> None:
        pass


def run_upstream(
    harness: Harness,
    loop: LoopThread,
    seed: int,
    budget: int,
    workers: int,
    shape: tuple[int, int] | None,
) -> tuple[Any, list[tuple[float, dict[str, str]]], float, float]:
    """(result, timeline, wall seconds, utilization) of one upstream run; `shape` None = A."""
    try:
        import gepa
        from gepa.strategies.proposal_sampling import PxNSampling
        from gepa.strategies.proposal_selection import BestImprovement
    except ImportError as err:
        raise SystemExit(
            "engines A and B need upstream gepa: .venv/bin/pip install -e '.[bench]'"
        ) from err
    task = harness.task
    strategies = {}
    if shape is not None:
        strategies = {
            "sampling_strategy": PxNSampling(*shape),
            "selection_strategy": BestImprovement(),
        }
    slots = ThreadSlots(workers, loop)
    start = time.monotonic()
    timeline = UpstreamTimeline(start)
    try:
        result = gepa.optimize(
            seed_candidate=task.seed_prompts,
            trainset=task.train,
            valset=task.val,
            adapter=UpstreamAdapter(harness, slots),
            reflection_lm=UpstreamReflectionLM(harness, slots),
            max_metric_calls=budget,
            seed=seed,
            reflection_prompt_template=upstream_templates(task.templates),
            logger=QuietLogger(),
            callbacks=[timeline],
            **strategies,
        )
        wall = time.monotonic() - start
    finally:
        slots.close()
    return result, timeline.points, wall, slots.utilization(wall)


# ---------------------------------------------------------------------------------------
# Running one engine, and the held-out score
# ---------------------------------------------------------------------------------------


def parse_variant(text: str) -> tuple[str, dict[str, Any]]:
    """`NAME=field:value,field:value` -> (NAME, GEPAConfig overrides); values are JSON
    where they parse as JSON (true, 2, "x"), else strings."""
    name, _, spec = text.partition("=")
    known = {f.name for f in fields(GEPAConfig)}
    overrides: dict[str, Any] = {}
    for item in filter(None, spec.split(",")):
        key, _, raw = item.partition(":")
        if key not in known:
            raise SystemExit(f"--variant {text!r}: {key!r} is not a GEPAConfig field")
        try:
            overrides[key] = json.loads(raw)
        except json.JSONDecodeError:
            overrides[key] = raw
    if not name or name in BASE_ENGINES:
        raise SystemExit(f"--variant {text!r}: name it with a letter other than A-D")
    return name, overrides


@dataclass
class Bench:
    args: argparse.Namespace
    loop: LoopThread
    task: BenchTask
    variants: dict[str, dict[str, Any]] = field(default_factory=dict)
    _scores: dict[tuple[str, str], float] = field(default_factory=dict)

    def harness(self, setting: str, seed: int) -> Harness:
        args = self.args
        latency = None
        if setting == "latency":
            reflection = args.reflection_latency
            latency = Latency(
                args.median_latency,
                args.median_latency if reflection is None else reflection,
                args.latency_sigma,
            )
        return Harness(self.task, seed, latency)

    def label(self, engine: str) -> str:
        if engine in BASE_ENGINES:
            return BASE_ENGINES[engine].format(shape=self.args.shape)
        spec = ",".join(f"{k}={v}" for k, v in self.variants[engine].items())
        return f"ours {self.args.shape} {spec}"

    def run(self, engine: str, setting: str, seed: int) -> Run:
        args, harness = self.args, self.harness(setting, seed)
        label = self.label(engine)
        if engine in ("A", "B"):
            shape = None if engine == "A" else _parse_shape(args.shape)
            used_shape = "1x1" if engine == "A" else args.shape
            result, timeline, wall, util = run_upstream(
                harness, self.loop, seed, args.budget, args.workers, shape
            )
            best_val = result.val_aggregate_scores[result.best_idx]
            seed_val = result.val_aggregate_scores[0]
        else:
            overrides = {"proposal_shape": "auto" if engine == "D" else args.shape}
            overrides.update(self.variants.get(engine, {}))
            result, points, wall, used_shape = self.loop.run(
                run_ours(harness, seed, args.budget, args.workers, overrides)
            )
            label = f"ours auto={used_shape}" if engine == "D" else label
            best_val, util = result.best_score, result.worker_utilization
            seed_val = result.val_aggregate_scores[0]
            timeline = [(t, dict(result.candidates[i])) for t, i in points]
        run = Run(
            engine=engine,
            label=f"{engine} {label}",
            predicted_s=self.predicted_s(engine, harness, len(result.candidates), used_shape),
            setting=setting,
            seed=seed,
            wall_s=wall,
            metric_calls=harness.metric_calls,
            budget=args.budget,
            reflection_calls=harness.reflection_calls,
            utilization=util,
            best_val=best_val,
            best_candidate=dict(result.best_candidate),
            timeline=timeline,
            seed_val=seed_val,
            depth=lineage_depth(result.parents, result.best_idx),
            admitted=list(result.val_aggregate_scores[1:]),
        )
        run.test = self.score(run.best_candidate, "test")
        run.ref_val = self.score(run.best_candidate, "val")
        run.referee = [(t, self.score(c, "val")) for t, c in timeline]
        return run

    def predicted_s(self, engine: str, harness: Harness, candidates: int, shape: str) -> float:
        """The runtime model's wall time for this run, from its own measured call latencies
        and acceptance rate (accepted children per reflection): upstream waits at a barrier
        after every stage, gepa_opt's proposals run without one."""
        ours = engine not in ("A", "B")
        shape = shape.split(">")[-1]  # an auto run's last shape
        return predict_wall_s(
            ProposalShape.parse(shape),
            harness.measured_latency(),
            self.args.workers,
            self.args.budget,
            minibatch_size=GEPAConfig().reflection_minibatch_size,
            valset_size=len(self.task.val),
            acceptance_rate=min(1.0, (candidates - 1) / max(1, harness.reflection_calls)),
            schedule=Schedule.BARRIER_FREE if ours else Schedule.BARRIER,
        ).wall_s

    def score(self, candidate: dict[str, str], split: str) -> float:
        """The candidate on the test split, or the referee pass on val: the task's own
        rollouts, untimed, once per candidate's texts, whichever engine asks."""
        key = (split, json.dumps(candidate, sort_keys=True))
        if key not in self._scores:
            harness = Harness(self.task, 0)
            examples = self.task.test if split == "test" else self.task.val
            scored = self.loop.run(harness.rollouts(examples, candidate))
            self._scores[key] = fmean(s.score for s in scored)
        return self._scores[key]


def _parse_shape(text: str) -> tuple[int, int]:
    p, _, n = text.lower().partition("x")
    return int(p), int(n)


# ---------------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--task", choices=list(TASK_DEFAULTS), default="demo")
    parser.add_argument("--budget", type=int, help="metric calls per run (demo 200, depth 600)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument(
        "--settings", nargs="+", default=["local", "latency"], choices=["local", "latency"]
    )
    parser.add_argument("--engines", nargs="+", default=list(BASE_ENGINES))
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        help="another gepa_opt arm: NAME=field:value,... (GEPAConfig fields over C's)",
    )
    parser.add_argument("--workers", type=int, default=8, help="W: LM-bound calls in flight")
    parser.add_argument("--shape", default="2x2", help="PxN of engines B and C")
    parser.add_argument("--median-latency", type=float, help="seconds (demo 1.0, depth 0.2)")
    parser.add_argument(
        "--reflection-latency", type=float, help="median seconds of a reflection call"
    )
    parser.add_argument("--latency-sigma", type=float, default=0.5)
    parser.add_argument("--n-train", type=int, help="demo 28, depth 40")
    parser.add_argument("--n-val", type=int, help="demo 28, depth 24")
    parser.add_argument("--split-seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write every run (timelines too) here")
    parser.add_argument(
        "--report", type=Path, help="print the report of runs a --json file holds; run nothing"
    )
    args = parser.parse_args()
    budget, latency = TASK_DEFAULTS[args.task]
    args.budget = args.budget or budget
    args.median_latency = latency if args.median_latency is None else args.median_latency
    return args


def make_task(args: argparse.Namespace) -> tuple[BenchTask, Callable[[], None]]:
    """The task, and what closes it (the demo task holds the local model). The demo's
    proposals are written by the night's reflection model where the settings give one
    (`[reflection]`, `FLYWHEEL_REFLECTION__*`), else by the agent's local model."""
    sizes = {k: v for k, v in (("n_train", args.n_train), ("n_val", args.n_val)) if v}
    if args.task == "depth":
        return DepthTask(split_seed=args.split_seed, **sizes), lambda: None
    from benchmarks.intent_task import IntentTask
    from infra.lm.engine.local import LocalLM
    from infra.lm.factory import make_lm
    from infra.settings import Settings

    lm, reflection, reflection_lm = LocalLM(), Settings().reflection, None
    if reflection is not None:
        reflection_lm = make_lm(reflection)
        where = reflection.model if reflection.backend == "openai" else reflection.model_path
        print(f"reflection model ({reflection.backend}): {where or 'the embedded one'}")

    def close() -> None:
        lm.close()
        if isinstance(reflection_lm, LocalLM):  # a remote one holds no model to free
            reflection_lm.close()

    return IntentTask(lm, reflection_lm, split_seed=args.split_seed, **sizes), close


def main() -> None:
    args = parse_args()
    if args.report:
        return report_saved(args.report)
    variants = dict(parse_variant(v) for v in args.variant)
    engines = sorted(set(args.engines) | set(variants))  # A first: its score is the bar
    unknown = sorted(set(engines) - set(BASE_ENGINES) - set(variants))
    if unknown:
        raise SystemExit(f"--engines {unknown}: not A-D and no --variant of that name")
    task, close = make_task(args)
    latency = f"median {args.median_latency} s"
    if args.reflection_latency is not None:
        latency += f" (reflections {args.reflection_latency} s)"
    print(
        f"task {task.name}: {len(task.train)} train / {len(task.val)} val / "
        f"{len(task.test)} test; budget {args.budget}, W={args.workers}, shape {args.shape}, "
        f"engines {engines}; latency lognormal {latency}, sigma {args.latency_sigma}"
    )
    loop = LoopThread()
    bench = Bench(args, loop, task, variants)
    all_runs: list[Run] = []
    try:
        for setting in args.settings:
            groups = []
            for seed in args.seeds:
                runs = {}
                for engine in engines:
                    print(f"... {engine} {setting} seed {seed}", file=sys.stderr, flush=True)
                    runs[engine] = bench.run(engine, setting, seed)
                report_group(runs)
                groups.append(runs)
                if args.json:  # rewritten after each seed: a long run interrupted keeps them
                    all_runs.extend(runs.values())
                    args.json.write_text(json.dumps([asdict(r) for r in all_runs], indent=1))
            report_setting(setting, groups)
    finally:
        close()
        loop.close()


if __name__ == "__main__":
    main()
