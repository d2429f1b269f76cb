"""The nightly flow: traces in, aligned judge through its gate, GEPA on prompts, a LoRA
round, held-out evaluation, versions registered in MLflow under alias "candidate", then
label requests and judge scores back to the trace source.

Every stage is a Prefect task whose result is persisted (under PREFECT_HOME, which the
CLI puts in the state folder) and keyed by run id and stage, so that
`flywheel run --resume RUN_ID` after a failure redoes only what did not finish.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime

from prefect import flow, task
from prefect.artifacts import create_markdown_artifact

from flows import feedback, stages
from flows.collect import Collected, collect, load_heldout, summarize, window_start
from flows.judge_gate import JudgeGate, gate_judge_stage
from flows.judge_in_use import JudgeInUse
from flows.progress import StageProgress
from flows.registration import (
    Registered,
    log_feedback,
    production_prompts,
    register_versions,
)
from flows.report import NightReport, render_markdown
from flows.runtime import runtime
from flows.stage_clock import StageClock
from judges.scaled_metric import check_ranked

log = logging.getLogger(__name__)


def _stage_key(context, parameters) -> str:
    return f"{parameters['run_id']}:{context.task.name}"


def _stage(name: str):
    return task(name=name, cache_key_fn=_stage_key, persist_result=True, retries=0)


async def _optimizing(label: str, budget: int, run):
    """Run a GEPA stage under a progress bar, and keep its optimization curve."""
    with StageProgress(label, budget) as progress:
        stage = await run(progress.on_event)
    stage.curve = progress.curve
    return stage


@_stage("collect-traces")
async def collect_traces(run_id: str) -> Collected:
    rt = runtime()
    cfg = rt.settings.traces
    since, fetched_at = window_start(cfg.lookback_hours), datetime.now(UTC)
    batch = rt.traces.fetch(since=since, limit=cfg.max_traces)
    config = rt.traces.score_config(cfg.annotation_name)
    ordinal = rt.settings.judge.ordinal_categories
    collected = collect(batch, rt.agent, cfg.annotation_name, since, fetched_at, config, ordinal)
    # Before any stage spends budget, and in this stage so that a resumed night reads a
    # fixed score config again: a scale with no better or worse cannot steer the agent.
    check_ranked(collected.scale)
    return collected


@_stage("align-judge")
async def align_judge(run_id: str, collected: Collected) -> stages.JudgeStage:
    rt = runtime()
    return await _optimizing(
        "judge alignment",
        rt.settings.judge.max_metric_calls,
        lambda on_event: stages.align_judge_stage(rt, collected.items, collected.scale, on_event),
    )


@_stage("gate-judge")
async def gate_judge(run_id: str, judge: stages.JudgeStage, collected: Collected) -> JudgeGate:
    rt = runtime()
    with StageProgress("judge gate and version", None):
        return await gate_judge_stage(rt, run_id, judge, collected)


@_stage("optimize-prompts")
async def optimize_prompts(
    run_id: str, collected: Collected, seed_prompts: dict[str, str], judge: JudgeInUse
) -> stages.PromptStage:
    rt = runtime()
    return await _optimizing(
        "agent prompts (GEPA)",
        rt.settings.agent_opt.max_metric_calls,
        lambda on_event: stages.optimize_prompts_stage(
            rt, collected.examples, seed_prompts, judge, on_event
        ),
    )


@_stage("lora-round")
async def lora_round(
    run_id: str, collected: Collected, prompts: dict[str, str], judge: JudgeInUse
) -> stages.LoraStage:
    rt = runtime()
    with StageProgress("LoRA round (SFT)", None):
        return await stages.lora_stage(rt, collected.examples, prompts, judge, rt.run_dir(run_id))


@task(
    name="evaluate-heldout",
    cache_key_fn=lambda c, p: f"{p['run_id']}:eval:{p['label']}",
    persist_result=True,
)
async def evaluate_heldout(
    run_id: str,
    label: str,
    prompts: dict[str, str],
    judge: JudgeInUse,
    adapter_path: str | None,
) -> stages.Evaluation:
    rt = runtime()
    adapter = stages.ensure_adapter(rt, run_id, adapter_path) if adapter_path else None
    examples = load_heldout(rt.heldout_path())
    with StageProgress(f"held-out evaluation: {label}", None):
        return await stages.evaluate_agent(rt, prompts, examples, judge, adapter)


@_stage("register-versions")
async def register(run_id: str, report: NightReport) -> Registered:
    return register_versions(runtime(), run_id, report)


# The feedback stages raise on failure, so that Prefect caches only what succeeded and a
# resumed night retries the rest; `feedback.send_feedback` catches, and the night ends.


@_stage("judge-night-traces")
async def judge_night_traces(
    run_id: str, collected: Collected, judge: JudgeInUse
) -> feedback.NightVerdicts:
    with StageProgress("judge on the night's traces", None):
        return await feedback.judge_night(runtime(), collected, judge)


@_stage("request-labels")
async def request_labels(run_id: str, verdicts: feedback.NightVerdicts, judge: JudgeInUse) -> int:
    rt = runtime()
    n = rt.settings.judge.active_learning_per_night
    pending = rt.traces.pending_label_requests()
    return rt.traces.request_labels(feedback.label_requests(verdicts, judge, n, pending))


@_stage("write-judge-scores")
async def write_judge_scores(
    run_id: str, verdicts: feedback.NightVerdicts, judge: JudgeInUse
) -> int:
    rt = runtime()
    name = rt.settings.traces.judge_score_name
    return rt.traces.write_scores(feedback.judge_scores(verdicts, judge, run_id, name))


@flow(name="nightly", log_prints=True)
async def nightly(run_id: str) -> NightReport:
    rt = runtime()
    start = time.perf_counter()
    clock = StageClock()
    collected = await clock.time("collect", collect_traces(run_id))
    seed_prompts = rt.agent.seed_prompts()
    seed_prompts = production_prompts(rt.registry, list(seed_prompts)) or seed_prompts
    aligned = await clock.time("judge", align_judge(run_id, collected))
    gate = await clock.time("judge_gate", gate_judge(run_id, aligned, collected))
    judge = gate.judge  # tonight's judge if it passed the gate, else the one in use
    evals = {
        "seed": await clock.time(
            "eval_seed", evaluate_heldout(run_id, "seed", seed_prompts, judge, None)
        )
    }
    prompt = await clock.time("prompts", optimize_prompts(run_id, collected, seed_prompts, judge))
    evals["prompts"] = await clock.time(
        "eval_prompts", evaluate_heldout(run_id, "prompts", prompt.prompts, judge, None)
    )
    lora = await clock.time("lora", lora_round(run_id, collected, prompt.prompts, judge))
    if lora.trained_path:  # measured even when not kept: held-out shows the true effect
        evals["lora"] = await clock.time(
            "eval_lora", evaluate_heldout(run_id, "lora", prompt.prompts, judge, lora.trained_path)
        )
    report = NightReport(
        run_id=run_id,
        collected=summarize(collected),
        judge=aligned,
        prompt=prompt,
        lora=lora,
        evals=evals,
        seconds=time.perf_counter() - start,
        stage_intervals=clock.intervals,
        gate=gate,
    )
    report.registered = await clock.time("register", register(run_id, report))
    report.feedback = await clock.time(
        "feedback",
        feedback.send_feedback(
            rt.settings.judge,
            judge,
            len(collected.examples),
            lambda: judge_night_traces(run_id, collected, judge),
            lambda verdicts: request_labels(run_id, verdicts, judge),
            lambda verdicts: write_judge_scores(run_id, verdicts, judge),
        ),
    )
    try:
        log_feedback(rt.registry, report)
    except Exception as err:  # the run already holds everything else
        log.error("could not add the feedback results to the MLflow run: %s", err)
    await create_markdown_artifact(
        markdown=render_markdown(report),
        key="nightly-report",
        description=f"flywheel night {run_id}",
    )
    return report
