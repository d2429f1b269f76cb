"""The night's fast-slow schedule as it runs: each step a Prefect task (GEPA on the
prompts, or a LoRA round on the weights), started from the best state so far, scored on
the held-out selection slice and kept or dropped as `flows.night.fast_slow` decides."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from prefect import task

from flows.night import stages
from flows.night.clock import StageClock
from flows.night.collect import Collected
from flows.night.fast_slow import (
    Kind,
    NightState,
    Step,
    StepDecision,
    decide_step,
    measured_on,
    paired_gain,
    prompt_budget,
    selection_score,
    weight_budget,
)
from flows.night.runtime import Runtime
from flows.night.tasks import optimizing, served, stage
from flows.night.training_runs import weight_step_dir
from flows.report.progress import StageProgress
from infra.lm.heap import release_free_heap
from infra.settings import AgentOptSettings, LoraSettings, parse_schedule
from infra.types import Example
from judges.judge import Judge
from weights.round import LoraRound, ServedAdapter

Front = list[tuple[dict[str, str], int]]
log = logging.getLogger(__name__)


@stage("optimize-prompts")
async def optimize_prompts(
    rt: Runtime,
    run_id: str,
    step: int,
    collected: Collected,
    start: NightState,
    judge: Judge,
    cfg: AgentOptSettings,
    weighted: tuple[tuple[Judge, float], ...] = (),
) -> stages.PromptStage:
    adapter = await served(rt, start.adapter)
    return await optimizing(
        f"step {step}: agent prompts (GEPA)",
        cfg.max_metric_calls,
        lambda on_event: stages.optimize_prompts_stage(
            rt,
            collected.examples,
            start.prompts,
            judge,
            on_event,
            adapter,
            rt.run_dir(run_id) / f"gepa-prompts-step{step}",
            cfg,
            collected.reply_targets(),
            weighted,
        ),
    )


@stage("lora-round")
async def lora_round(
    rt: Runtime,
    run_id: str,
    step: int,
    collected: Collected,
    start: NightState,
    judge: Judge,
    cfg: LoraSettings,
    front: Front | None,
    selection: list[Example] | None = None,
) -> LoraRound:
    await served(rt, start.adapter)
    with StageProgress(f"step {step}: LoRA round ({cfg.method})", None, "rollouts") as progress:
        return await stages.lora_stage(
            rt,
            collected.examples,
            start.prompts,
            judge,
            weight_step_dir(rt, run_id, step),
            start.adapter,
            cfg,
            front,
            adapter_name(run_id, step),
            collected.human_replies(),
            selection or None,
            progress,
        )


def adapter_name(run_id: str, step: int) -> str:
    """Unique per night and step: a model server keeps the adapters it loaded."""
    return f"adapter-{run_id}-step{step}"


@task(
    name="evaluate-heldout",
    cache_key_fn=lambda context, p: f"{p['run_id']}:eval:{p['label']}",
    persist_result=True,
)
async def evaluate_heldout(
    rt: Runtime,
    run_id: str,
    label: str,
    state: NightState,
    judge: Judge,
    examples: list[Example],
) -> stages.Evaluation:
    name = await served(rt, state.adapter)
    with StageProgress(f"held-out evaluation: {label}", len(examples), "rollouts") as progress:
        return await stages.evaluate_agent(rt, state.prompts, examples, judge, name, progress)


@dataclass(frozen=True)
class StepTasks:
    """What runs a step: the Prefect tasks above (tests plug in fakes here)."""

    prompts: Callable[..., Awaitable[stages.PromptStage]] = optimize_prompts
    weights: Callable[..., Awaitable[LoraRound]] = lora_round
    evaluate: Callable[..., Awaitable[stages.Evaluation]] = evaluate_heldout


@dataclass
class Schedule:
    """The steps of `fast_slow.schedule`, run in order from production's state."""

    rt: Runtime
    run_id: str
    clock: StageClock
    collected: Collected
    judge: Judge
    selection: list[Example]  # the held-out slice that chooses between steps
    best: NightState  # the best state so far: production's until a step is kept
    best_score: float | None = None  # on the selection slice; None: none, steps read Pareto
    best_selection: stages.Evaluation | None = None  # its per-example scores there
    on: str = measured_on(None)  # what the scores are measured on, for the report
    front: Front | None = None  # the last kept prompt step's Pareto front (FST)
    tasks: StepTasks = field(default_factory=StepTasks)
    # the secondary criteria in the prompt steps' objective (`flows.night.criteria.weighted`)
    weighted: tuple[tuple[Judge, float], ...] = ()

    async def run(self) -> list[Step]:
        cfg = self.rt.settings.fast_slow
        kinds = parse_schedule(cfg.schedule)
        if not self.collected.examples:  # GEPA and trl raise on an empty training set
            reason = "not run: no traces in the night's window to learn from"
            return [self._not_run(index, kind, reason) for index, kind in enumerate(kinds, 1)]
        if self.selection:
            start = await self._select(0, self.best)
            self.best_score, self.best_selection = selection_score(start), start
            self.on = measured_on(start if self.best_score is not None else None)
        steps: list[Step] = []
        began = time.perf_counter()
        for index, kind in enumerate(kinds, 1):
            if cfg.max_seconds is not None and time.perf_counter() - began > cfg.max_seconds:
                limit = f"fast_slow.max_seconds ({cfg.max_seconds:.0f} s)"
                reason = f"not run: the schedule ran past {limit}"
                steps.append(self._not_run(index, kind, reason))
                continue
            k = kinds[: index - 1].count(kind)  # its place among the steps of its kind
            started = time.perf_counter()
            run = self._prompts if kind == "p" else self._weights
            step = await run(index, kinds, k)
            step.seconds = time.perf_counter() - started
            steps.append(step)
            await release_free_heap()  # what the step freed, before the next one allocates
        return steps

    async def _prompts(self, index: int, kinds: tuple[Kind, ...], k: int) -> Step:
        cfg = prompt_budget(self.rt.settings.agent_opt, kinds, k)
        start = self.best
        work = self.tasks.prompts(
            self.rt, self.run_id, index, self.collected, start, self.judge, cfg, self.weighted
        )
        result = await self.clock.time(f"step{index}_prompts", work)
        changed = result.prompts != start.prompts
        state = NightState(result.prompts, start.adapter, index) if changed else None
        why = "GEPA found no prompts better than the step's start on its Pareto set"
        step = await self._decide(index, "p", state, (result.seed_val, result.best_val), why)
        step.prompt = result
        if step.decision.kept:
            self.front = result.front
        return step

    async def _weights(self, index: int, kinds: tuple[Kind, ...], k: int) -> Step:
        cfg = weight_budget(self.rt.settings.lora, kinds, k)
        front = self.front if self.rt.settings.fast_slow.fst else None
        start = self.best
        work = self.tasks.weights(
            self.rt, self.run_id, index, self.collected, start, self.judge, cfg, front,
            self.selection,
        )  # fmt: skip
        result = await self.clock.time(f"step{index}_lora", work)
        state = None
        if result.trained_path:
            trained = ServedAdapter(adapter_name(self.run_id, index), result.trained_path)
            state = NightState(start.prompts, trained, index)
        why = result.note or "no adapter was trained"
        step = await self._decide(index, "w", state, (result.val_without, result.val_with), why)
        step.lora, step.fst = result, front is not None
        if state is not None and not step.decision.kept:
            await self._unload(state.adapter)
        return step

    async def _unload(self, adapter: ServedAdapter) -> None:
        """A dropped step's adapter: no later step runs it, and it holds a weight set."""
        try:
            await self.rt.lm.unload_adapter(adapter.name)
        except Exception as err:  # a server without unloading: it only costs memory
            log.warning("could not unload %s: %s", adapter.name, err)

    async def _decide(
        self,
        index: int,
        kind: Kind,
        state: NightState | None,
        pareto: tuple[float, float | None],
        why_none: str,
    ) -> Step:
        """Score the step's state where steps are chosen, and keep it if it is better.
        `pareto`: the step's start and result on its own Pareto set, read when there is
        no selection slice."""
        start, selection, gain = self.best, None, None
        if self.best_score is not None:
            before, after = self.best_score, None
            if state is not None:
                selection = await self._select(index, state)
                after = selection_score(selection)
                if self.best_selection is not None:
                    gain = paired_gain(self.best_selection, selection, self.rt.settings.seed)
        else:
            before, after = pareto[0], pareto[1] if state is not None else None
        min_gain = self.rt.settings.fast_slow.min_step_gain
        decision = decide_step(before, after, self.on, min_gain, start.step, why_none, gain)
        if decision.kept and state is not None:
            self.best = state
            self.best_score = after if selection is not None else None
            self.best_selection = selection
        prompts = dict(start.prompts)
        return Step(index, kind, start.step, decision, 0.0, prompts, selection=selection)

    def _not_run(self, index: int, kind: Kind, reason: str) -> Step:
        decision = StepDecision(False, self.best_score, None, self.on, reason)
        return Step(index, kind, self.best.step, decision, 0.0, dict(self.best.prompts))

    async def _select(self, index: int, state: NightState) -> stages.Evaluation:
        work = self.tasks.evaluate(
            self.rt, self.run_id, f"select-step{index}", state, self.judge, self.selection
        )
        return await self.clock.time(f"select_step{index}", work)
