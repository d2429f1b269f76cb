"""gepa_opt beside upstream gepa 0.1.4: time to the same quality, same task, LM, budget, seeds.

Engines (one invocation runs them side by side):
  A  upstream gepa 0.1.4, default: one mutation per step, W-thread parallel batch evaluation
  B  upstream gepa 0.1.4, `PxNSampling(P, N)` + `BestImprovement` selection (`--shape`)
  C  gepa_opt, `GEPAConfig(proposal_shape=--shape, max_concurrency=W)`
  D  gepa_opt, `proposal_shape="auto"` (the shape the runtime model picks for W)

Task: the demo agent (`infra/agents/intent_router.py`) with its two prompt components
(instructions, example turns), on the requests of `infra/traces/demo_data/heldout.jsonl`,
split by `--split-seed` into train / val / test (28 / 28 / 84: 4 / 4 / 12 per intent). The
metric needs no judge, so both libraries see exactly the same one: 1.0 if the first intent
the reply names is the true intent, else 0.0, with feedback naming the right intent.
Defaults shared by both libraries: minibatch 3, Pareto candidate selection, round-robin
components, skip perfect parents, the paper's meta-prompt for the instructions (both ship
the same text and record rendering). The example turns get their own template and
records, given to both libraries alike (`EXAMPLE_TURNS_TEMPLATE`): each record leads with
the right turn as `request => label`, and the template asks for the list of turns back.

LM: the local model (`LocalLM()`, default settings) is both the agent and the reflection
LM (200 tokens, temperature 0.7, a fresh sampling seed per call drawn from the run's seed).
Settings: `local` (the model as is) and `latency` (each call first sleeps a lognormal
delay, median `--median-latency` s, sigma `--latency-sigma`: a remote API). W = `--workers`
LM-bound calls in flight, in both settings.

How upstream (synchronous) is wired: every async LM call runs on one event loop in a
background thread (`asyncio.run_coroutine_threadsafe`); the adapter's `batch_evaluate`
and `evaluate` fan each (candidate, example) pair out to a pool of W threads, and the
reflection LM's `batch_complete` (which upstream uses for the several reflections of a
PxN step) sends its prompts through the same pool. Its utilization is the busy
thread-seconds of that pool over W x wall seconds; gepa_opt reports its own
(`GEPAResult.worker_utilization`, slot-seconds of its W-slot pool, reflections included).

Metric calls and reflection calls are counted in the shared harness, identically for all
engines; overshoot is calls used past `--budget` (upstream checks its budget only between
steps; gepa_opt starts a proposal only if its worst case, 2 minibatches + the valset, still
fits, so a budget under seed valset + that worst case, e.g. 40 with a 28-example valset,
runs no proposal at all). best_val is the library's own val score of its best candidate,
ref_val the referee's (below), test that candidate on the test split (raw LM, untimed).

Time to quality: each engine records a timeline of (seconds since its `optimize` call,
the candidate it would return if stopped then: its own best on val), one point whenever a
candidate enters its pool: for gepa_opt at each `FrontierChanged` event (`on_event`), for
upstream at each `on_valset_evaluated` callback (the seed and every accepted candidate,
fired right after its valset evaluation). Those candidates are then scored by one referee
pass on val (the raw LM, untimed, cached by the candidate's texts, shared by all engines:
`ref_val`). An engine's own val scores cannot be compared across runs: the local engine's
bf16 results depend on which requests share a batch (greedy tokens of the same request
differ alone and in a batch), so the same candidate scored .200 in one run and .233 in
another. The bar for a setting+seed is the referee score of A's final best candidate; if
that is not above the seed's, the best referee score any engine's final candidate got
(printed when so). An engine's time to quality is the first timeline point whose
candidate's referee score reaches the bar; per setting the ratios C/A, C/B (D/A, D/B) are
of the mean time to quality over the seeds where both engines reached the bar. Since one
lucky proposal decides "reached or never" in a seed, each setting also averages every
engine's referee curve over the seeds (what it would return if stopped at t) and reads
the time that mean curve first reaches A's mean final ref_val. `--json` writes every run,
timelines and candidates included.

    .venv/bin/python benchmarks/gepa_vs_upstream.py [--budget 200] [--seeds 0 1 2]
        [--settings local latency] [--engines A B C D] [--workers 8] [--shape 2x2]
        [--median-latency 1.0] [--latency-sigma 0.5] [--json runs.json]
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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from statistics import fmean, stdev
from typing import Any

import infra.traces
from flows.collect import load_heldout
from gepa_opt import EvaluationBatch, FrontierChanged, GEPAConfig, GEPAEngine, ProposalShape
from gepa_opt.meta_prompt import CURRENT_INSTRUCTIONS, EXAMPLES
from gepa_opt.runtime_model import CallLatency, Schedule, predict_wall_s
from infra.agents.intent_router import LABELS, IntentRouter, parse_intent
from infra.lm import LM, Completion
from infra.lm.local import LocalLM
from infra.settings import AgentOptSettings
from infra.types import Example

HELDOUT = Path(infra.traces.__file__).parent / "demo_data" / "heldout.jsonl"
ENGINES = {
    "A": "upstream 1x1",
    "B": "upstream {shape} best",
    "C": "ours {shape}",
    "D": "ours auto",
}

# ---------------------------------------------------------------------------------------
# The task
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Task:
    train: list[Example]
    val: list[Example]
    test: list[Example]
    seed_prompts: dict[str, str]


def load_task(n_train: int, n_val: int, split_seed: int) -> Task:
    """The labelled demo requests, shuffled once by a fixed seed within each intent and
    dealt one intent at a time, then cut in three: every split holds the intents alike
    (a plain shuffle left val with no playlist request and 8 of 30 searches)."""
    rng = random.Random(split_seed)
    by_intent: dict[str, list[Example]] = {}
    for example in sorted(load_heldout(HELDOUT), key=lambda e: e.id):
        by_intent.setdefault(example.reference, []).append(example)
    for group in by_intent.values():
        rng.shuffle(group)
    groups = [by_intent[intent] for intent in sorted(by_intent)]
    examples = [
        group[i] for i in range(max(map(len, groups))) for group in groups if i < len(group)
    ]
    train, val = examples[:n_train], examples[n_train : n_train + n_val]
    test = examples[n_train + n_val :]
    if not test:
        raise SystemExit(f"{len(examples)} examples leave no test split after {n_train}+{n_val}")
    return Task(train, val, test, IntentRouter().seed_prompts())


def judge_reply(example: Example, output: str) -> tuple[float, str]:
    """Exact match of the predicted intent, and feedback that names the right one."""
    want = LABELS[example.reference]
    got = parse_intent(output)
    if got == example.reference:
        return 1.0, f"Correct: this is a '{want}' request."
    named = f"named '{LABELS[got]}'" if got else "named no label"
    return 0.0, (
        f"Wrong: the reply {named}; the right label is '{want}'. The reply must name "
        f"exactly one of: {', '.join(LABELS.values())}."
    )


@dataclass(frozen=True)
class Scored:
    """One rollout with its score and feedback: the trajectory both libraries reflect on."""

    example: Example
    output: str
    score: float
    feedback: str

    def record(self) -> dict[str, str]:
        """The paper's record: what the instructions are reflected on."""
        return {
            "Inputs": self.example.inputs["request"],
            "Generated Outputs": self.output,
            "Feedback": self.feedback,
        }

    def example_turn_record(self) -> dict[str, str]:
        """The same evidence for the example turns, led by the right turn in their own
        `request => label` format (the feedback already names the label)."""
        turn = f"{self.example.inputs['request']} => {LABELS[self.example.reference]}"
        return {
            "Right example turn": turn,
            "Assistant's reply": self.output,
            "Feedback": self.feedback,
        }


# The example turns are a list, not an instruction: the paper's meta-prompt asks for "a new
# instruction", which a 135M reflection LM answers with prose that holds no turn at all.
# Both libraries get this template for that component, the paper's for the instructions.
EXAMPLE_TURNS_TEMPLATE = f"""I gave an assistant these example turns, one per line as `request => label`:
```
{CURRENT_INSTRUCTIONS}
```

These requests were answered wrongly or rightly; each shows its right example turn:
```
{EXAMPLES}
```

Write the new list of example turns, one per line as `request => label`: the turns you have, plus the right turns above.

Provide the new list within ``` blocks."""  # noqa: E501
COMPONENT_TEMPLATES = {"examples": EXAMPLE_TURNS_TEMPLATE}


def upstream_templates() -> dict[str, str]:
    """The same templates in upstream's placeholders (it renders records identically)."""
    return {
        component: template.replace(CURRENT_INSTRUCTIONS, "<curr_param>").replace(
            EXAMPLES, "<side_info>"
        )
        for component, template in COMPONENT_TEMPLATES.items()
    }


def reflective_dataset(trajectories: list[Scored], components: list[str]) -> dict[str, list]:
    return {
        component: [
            s.example_turn_record() if component == "examples" else s.record() for s in trajectories
        ]
        for component in components
    }


# ---------------------------------------------------------------------------------------
# LMs, and the harness both libraries call through
# ---------------------------------------------------------------------------------------


class LatencyLM:
    """An LM behind a remote-API-like delay: each call first sleeps a lognormal time."""

    def __init__(self, inner: LM, median_s: float, sigma: float, rng: random.Random):
        self.inner, self.mu, self.sigma, self.rng = inner, math.log(median_s), sigma, rng

    async def complete(self, messages: list[dict[str, str]], **params: Any) -> Completion:
        await asyncio.sleep(self.rng.lognormvariate(self.mu, self.sigma))
        return await self.inner.complete(messages, **params)

    async def complete_batch(self, batch: list[list[dict[str, str]]], **params) -> list:
        return list(await asyncio.gather(*(self.complete(m, **params) for m in batch)))


class Harness:
    """The agent, its metric and the reflection LM, counting what each run spends.

    All counting happens in coroutines on the one event loop, so it needs no lock.
    """

    def __init__(self, lm: LM, seed: int, settings: AgentOptSettings):
        self.lm, self.seed = lm, seed
        self.agent = IntentRouter()
        self.max_tokens, self.reflection_max_tokens = (
            settings.max_tokens,
            settings.reflection_max_tokens,
        )
        self.metric_calls = 0
        self.reflection_calls = 0
        self.metric_s = 0.0  # summed latency of each kind of call, for the runtime model
        self.reflection_s = 0.0

    async def rollout(self, example: Example, candidate: dict[str, str]) -> Scored:
        self.metric_calls += 1
        start = time.monotonic()
        run = await self.agent.run(
            example, candidate, self.lm, max_tokens=self.max_tokens, temperature=0.0
        )
        self.metric_s += time.monotonic() - start
        return Scored(example, run.output, *judge_reply(example, run.output))

    async def rollouts(self, examples: list[Example], candidate: dict[str, str]) -> list[Scored]:
        return list(await asyncio.gather(*(self.rollout(x, candidate) for x in examples)))

    async def reflect(self, prompt: str) -> str:
        """A fresh sampling seed per call: N children of one parent must not all coincide."""
        self.reflection_calls += 1
        start = time.monotonic()
        completion = await self.lm.complete(
            [{"role": "user", "content": prompt}],
            max_tokens=self.reflection_max_tokens,
            temperature=0.7,
            seed=self.seed * 1_000_003 + self.reflection_calls,
        )
        self.reflection_s += time.monotonic() - start
        return completion.text

    def latency(self) -> CallLatency:
        """Mean seconds per metric and per reflection call, as this run measured them."""
        return CallLatency(
            self.metric_s / max(1, self.metric_calls),
            self.reflection_s / max(1, self.reflection_calls),
        )


class LoopThread:
    """One event loop in a background thread: every LM coroutine of the benchmark runs here."""

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
# One run's record
# ---------------------------------------------------------------------------------------


@dataclass
class Run:
    engine: str
    label: str
    setting: str
    seed: int
    wall_s: float
    metric_calls: int
    budget: int
    reflection_calls: int
    utilization: float
    best_val: float
    best_candidate: dict[str, str]
    timeline: list[tuple[float, dict[str, str]]]
    """(seconds since the start, the engine's own best candidate then), per pool entry."""
    seed_val: float
    referee: list[tuple[float, float]] = field(default_factory=list)
    """(seconds, the referee's val score of the timeline's candidate)."""
    ref_val: float = float("nan")
    """The referee's val score of the final best candidate."""
    predicted_s: float = float("nan")
    """The runtime model's wall time, from this run's measured latencies."""
    test: float = float("nan")
    ttq_s: float | None = None

    @property
    def overshoot(self) -> int:
        return max(0, self.metric_calls - self.budget)


# ---------------------------------------------------------------------------------------
# gepa_opt (C, D)
# ---------------------------------------------------------------------------------------


class OursAdapter:
    """`gepa_opt.Adapter` over the harness (the engine calls it one example at a time)."""

    def __init__(self, harness: Harness):
        self.harness = harness

    async def evaluate(
        self, batch: list[Example], candidate: dict[str, str], capture_traces: bool = False
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
        return reflective_dataset(eval_batch.trajectories or [], components)


async def run_ours(
    harness: Harness, task: Task, seed: int, budget: int, workers: int, shape: str
) -> tuple[Any, list[tuple[float, float]], float, str]:
    """(result, timeline of (seconds, best index), wall seconds, shape used) of one run."""
    timeline: list[tuple[float, int]] = []
    start = time.monotonic()

    def on_event(event: Any) -> None:
        if isinstance(event, FrontierChanged):
            timeline.append((time.monotonic() - start, event.best_idx))

    config = GEPAConfig(
        max_metric_calls=budget,
        max_concurrency=workers,
        proposal_shape=shape,
        seed=seed,
        component_prompt_templates=COMPONENT_TEMPLATES,
    )
    engine = GEPAEngine(
        task.seed_prompts,
        task.train,
        task.val,
        OursAdapter(harness),
        harness.reflect,
        config,
        example_id=lambda ex: ex.id,
        on_event=on_event,
    )
    result = await engine.run()
    return result, timeline, time.monotonic() - start, str(engine.shape)


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

    def batch_evaluate(self, items: list[tuple[dict[str, str], list[Example]]]) -> list:
        from gepa import EvaluationBatch as UpstreamBatch

        def call(candidate: dict[str, str], example: Example) -> Callable[[], Awaitable[Scored]]:
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
        self, batch: list[Example], candidate: dict[str, str], capture_traces: bool = False
    ) -> Any:
        (result,) = self.batch_evaluate([(candidate, batch)])
        if not capture_traces:
            result.trajectories = None
        return result

    def make_reflective_dataset(
        self, candidate: dict[str, str], eval_batch: Any, components_to_update: list[str]
    ) -> dict[str, list]:
        return reflective_dataset(eval_batch.trajectories or [], components_to_update)


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
    task: Task,
    seed: int,
    budget: int,
    workers: int,
    shape: tuple[int, int] | None,
) -> tuple[Any, list[tuple[float, float]], float, float]:
    """(result, timeline, wall seconds, utilization) of one upstream run; `shape` None = A."""
    try:
        import gepa
        from gepa.strategies.proposal_sampling import PxNSampling
        from gepa.strategies.proposal_selection import BestImprovement
    except ImportError as err:
        raise SystemExit(
            "engines A and B need upstream gepa: .venv/bin/pip install -e '.[bench]'"
        ) from err
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
            reflection_prompt_template=upstream_templates(),
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


@dataclass
class Bench:
    args: argparse.Namespace
    loop: LoopThread
    lm: LM
    task: Task
    settings: AgentOptSettings = field(default_factory=AgentOptSettings)
    _scores: dict[tuple[str, str], float] = field(default_factory=dict)

    def harness(self, setting: str, seed: int) -> Harness:
        lm = self.lm
        if setting == "latency":
            rng = random.Random(f"latency:{seed}")
            lm = LatencyLM(self.lm, self.args.median_latency, self.args.latency_sigma, rng)
        return Harness(lm, seed, self.settings)

    def run(self, engine: str, setting: str, seed: int) -> Run:
        args, harness = self.args, self.harness(setting, seed)
        label = ENGINES[engine].format(shape=args.shape)
        if engine in ("A", "B"):
            shape = None if engine == "A" else _parse_shape(args.shape)
            used_shape = "1x1" if engine == "A" else args.shape
            result, timeline, wall, util = run_upstream(
                harness, self.loop, self.task, seed, args.budget, args.workers, shape
            )
            best_val = result.val_aggregate_scores[result.best_idx]
            seed_val = result.val_aggregate_scores[0]
        else:
            shape = args.shape if engine == "C" else "auto"
            result, timeline, wall, used = self.loop.run(
                run_ours(harness, self.task, seed, args.budget, args.workers, shape)
            )
            label = f"ours auto={used}" if engine == "D" else label
            used_shape = used
            best_val, util = result.best_score, result.worker_utilization
            seed_val = result.val_aggregate_scores[0]
            timeline = [(t, dict(result.candidates[i])) for t, i in timeline]
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
        )
        run.test = self.score(run.best_candidate, "test")
        run.ref_val = self.score(run.best_candidate, "val")
        run.referee = [(t, self.score(c, "val")) for t, c in timeline]
        return run

    def predicted_s(self, engine: str, harness: Harness, candidates: int, shape: str) -> float:
        """The runtime model's wall time for this run, from its own measured call latencies
        and acceptance rate (accepted children per reflection): upstream waits at a barrier
        after every stage, gepa_opt keeps up to W proposals in flight."""
        ours = engine in ("C", "D")
        return predict_wall_s(
            ProposalShape.parse(shape),
            harness.latency(),
            self.args.workers,
            self.args.budget,
            minibatch_size=GEPAConfig().reflection_minibatch_size,
            valset_size=len(self.task.val),
            acceptance_rate=min(1.0, (candidates - 1) / max(1, harness.reflection_calls)),
            schedule=Schedule.BARRIER_FREE if ours else Schedule.BARRIER,
            max_in_flight=self.args.workers if ours else None,
        ).wall_s

    def score(self, candidate: dict[str, str], split: str) -> float:
        """The candidate on the test split, or the referee pass on val: the raw LM,
        untimed, once per candidate's texts, whichever engine asks."""
        key = (split, json.dumps(candidate, sort_keys=True))
        if key not in self._scores:
            harness = Harness(self.lm, 0, self.settings)
            examples = self.task.test if split == "test" else self.task.val
            scored = self.loop.run(harness.rollouts(examples, candidate))
            self._scores[key] = fmean(s.score for s in scored)
        return self._scores[key]


def _parse_shape(text: str) -> tuple[int, int]:
    p, _, n = text.lower().partition("x")
    return int(p), int(n)


# ---------------------------------------------------------------------------------------
# Time to quality and the report
# ---------------------------------------------------------------------------------------

EPS = 1e-9


def choose_bar(finals: dict[str, float], seed: float) -> tuple[float, str]:
    """A's final referee score; if that is not above the seed's, the best final score of
    any engine. `finals`: engine -> final ref_val (one seed's, or the seeds' mean)."""
    best_any = max(finals.values())
    if "A" not in finals:
        return best_any, "A not run: bar = best ref_val of any engine"
    if finals["A"] > seed + EPS:
        return finals["A"], "bar = ref_val of A's final candidate"
    if best_any > seed + EPS:
        return best_any, "A's final candidate is not above the seed: bar = best ref_val"
    return best_any, "no engine's final candidate is above the seed: bar = the seed's"


def quality_bar(runs: dict[str, Run]) -> tuple[float, str]:
    seed = next(iter(runs.values())).referee[0][1]  # the same text for every engine
    return choose_bar({e: r.ref_val for e, r in runs.items()}, seed)


def time_to_quality(referee: list[tuple[float, float]], bar: float) -> float | None:
    return next((t for t, score in referee if score >= bar - EPS), None)


HEADER = (
    f"{'engine':<22}{'setting':<9}{'seed':>4}{'wall_s':>8}{'pred_s':>8}{'calls':>7}{'over':>6}"
    f"{'refl':>6}{'util':>6}{'seed_val':>9}{'best_val':>9}{'ref_val':>8}{'test':>7}{'ttq_s':>8}"
)


def row(run: Run) -> str:
    ttq = "never" if run.ttq_s is None else f"{run.ttq_s:.1f}"
    return (
        f"{run.label:<22}{run.setting:<9}{run.seed:>4}{run.wall_s:>8.1f}{run.predicted_s:>8.1f}"
        f"{run.metric_calls:>7}"
        f"{run.overshoot:>6}{run.reflection_calls:>6}{run.utilization:>6.2f}"
        f"{run.seed_val:>9.3f}{run.best_val:>9.3f}{run.ref_val:>8.3f}{run.test:>7.3f}{ttq:>8}"
    )


def report_group(runs: dict[str, Run]) -> None:
    bar, note = quality_bar(runs)
    for run in runs.values():
        run.ttq_s = time_to_quality(run.referee, bar)
    first = next(iter(runs.values()))
    print(f"\n{first.setting}, seed {first.seed}: quality bar {bar:.3f} ({note})")
    print(HEADER)
    for run in runs.values():
        print(row(run))
    sys.stdout.flush()


def ratio(groups: list[dict[str, Run]], num: str, den: str) -> str:
    pairs = [
        (g[num].ttq_s, g[den].ttq_s)
        for g in groups
        if num in g and den in g and g[num].ttq_s is not None and g[den].ttq_s is not None
    ]
    if not pairs:
        return f"  {num}/{den} time to quality: n/a (no seed where both reached the bar)"
    value = fmean(n for n, _ in pairs) / fmean(d for _, d in pairs)
    seeds = f"{len(pairs)}/{len(groups)} seeds"
    return f"  {num}/{den} time to quality: {value:.2f} (ratio of means over {seeds})"


def mean_curve(runs: list[Run]) -> list[tuple[float, float]]:
    """The referee score of what each run would return if stopped at t, averaged over
    the runs (seeds), at every t where one of them changes."""
    times = sorted({t for run in runs for t, _ in run.referee})

    def at(run: Run, t: float) -> float:
        """The last point at or before t; before its first point, the seed's score."""
        return next(
            (score for when, score in reversed(run.referee) if when <= t + EPS), run.referee[0][1]
        )

    return [(t, fmean(at(run, t) for run in runs)) for t in times]


def _sd(values: list[float]) -> float:
    return stdev(values) if len(values) > 1 else 0.0


def report_setting(setting: str, groups: list[dict[str, Run]]) -> None:
    print(f"\n== {setting}: time to quality, per seed (means over seeds where both reached) ==")
    engines = [e for e in ENGINES if any(e in g for g in groups)]
    for engine in engines:
        times = [g[engine].ttq_s for g in groups if engine in g]
        reached = [t for t in times if t is not None]
        mean = f"{fmean(reached):.1f} s" if reached else "never"
        print(f"  {engine}: {mean} (reached the bar in {len(reached)}/{len(times)} seeds)")
    for num, den in (("C", "A"), ("C", "B"), ("D", "A"), ("D", "B")):
        if num in engines and den in engines:
            print(ratio(groups, num, den))
    # One lucky or unlucky seed decides "reached or never" above; the seed-averaged curve
    # asks the same question of each engine's expected quality over time.
    curves = {e: mean_curve([g[e] for g in groups if e in g]) for e in engines}
    finals = {e: fmean(g[e].ref_val for g in groups if e in g) for e in engines}
    seed = fmean(g[engines[0]].referee[0][1] for g in groups)
    bar, note = choose_bar(finals, seed)
    print(f"\n== {setting}: seed-averaged curves, bar {bar:.3f} (means over seeds: {note}) ==")
    ttq = {e: time_to_quality(curve, bar) for e, curve in curves.items()}
    for e in engines:
        runs = [g[e] for g in groups if e in g]
        reached = "never" if ttq[e] is None else f"{ttq[e]:.1f} s"
        print(
            f"  {e}: final ref_val {finals[e]:.3f} ± {_sd([r.ref_val for r in runs]):.3f}, "
            f"test {fmean(r.test for r in runs):.3f} ± {_sd([r.test for r in runs]):.3f} "
            f"(mean ± sd over seeds), reaches the bar at {reached}"
        )
    for num, den in (("C", "A"), ("C", "B"), ("D", "A"), ("D", "B")):
        if num in ttq and den in ttq and ttq[num] is not None and ttq[den] is not None:
            print(f"  {num}/{den} time to quality: {ttq[num] / ttq[den]:.2f}")
        elif num in ttq and den in ttq:
            print(f"  {num}/{den} time to quality: n/a ({num if ttq[num] is None else den} never)")


# ---------------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--budget", type=int, default=200, help="metric calls per run")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument(
        "--settings", nargs="+", default=["local", "latency"], choices=["local", "latency"]
    )
    parser.add_argument("--engines", nargs="+", default=list(ENGINES), choices=list(ENGINES))
    parser.add_argument("--workers", type=int, default=8, help="W: LM-bound calls in flight")
    parser.add_argument("--shape", default="2x2", help="PxN of engines B and C")
    parser.add_argument("--median-latency", type=float, default=1.0, help="seconds")
    parser.add_argument("--latency-sigma", type=float, default=0.5)
    parser.add_argument("--n-train", type=int, default=28)
    parser.add_argument("--n-val", type=int, default=28)
    parser.add_argument("--split-seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write every run (timelines too) here")
    parser.add_argument(
        "--report", type=Path, help="print the report of runs a --json file holds; run nothing"
    )
    return parser.parse_args()


def report_saved(path: Path) -> None:
    """The report again, from a --json file: tables and ratios without re-running."""
    runs = [Run(**saved) for saved in json.loads(path.read_text())]
    for run in runs:  # JSON has no tuples
        run.timeline = [(t, c) for t, c in run.timeline]
        run.referee = [(t, score) for t, score in run.referee]
    for setting in dict.fromkeys(r.setting for r in runs):
        groups = []
        for seed in dict.fromkeys(r.seed for r in runs if r.setting == setting):
            group = {r.engine: r for r in runs if r.setting == setting and r.seed == seed}
            report_group(group)
            groups.append(group)
        report_setting(setting, groups)


def main() -> None:
    args = parse_args()
    if args.report:
        return report_saved(args.report)
    engines = sorted(set(args.engines))  # A first: its final score is the others' bar
    task = load_task(args.n_train, args.n_val, args.split_seed)
    print(
        f"task: {len(task.train)} train / {len(task.val)} val / {len(task.test)} test; "
        f"budget {args.budget}, W={args.workers}, shape {args.shape}, engines {engines}; "
        f"latency lognormal median {args.median_latency} s, sigma {args.latency_sigma}"
    )
    loop, lm = LoopThread(), LocalLM()
    bench = Bench(args, loop, lm, task)
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
        lm.close()
        loop.close()


if __name__ == "__main__":
    main()
