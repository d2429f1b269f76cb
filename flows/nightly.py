"""The nightly flow: traces in, aligned judge through its gate, the fast-slow schedule of
prompt (GEPA) and weight (LoRA) steps (`flows.night.schedule`), held-out evaluation, versions
registered in MLflow under alias "candidate", then label requests and judge scores back
to the trace source.

Every stage is a Prefect task whose result is persisted (under PREFECT_HOME, which the
CLI puts in the state folder) and keyed by run id and stage (and step), so that
`flywheel run --resume RUN_ID` after a failure redoes only what did not finish. Stages
receive the `Runtime` (models, trace source, registry) as their first argument; the
night's knobs are the flow's parameters.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from prefect import flow
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.settings import get_current_settings
from prefect.tasks import exponential_backoff

from flows.night import feedback, stages
from flows.night.calls import check_stage, night_calls
from flows.night.canary_check import canary_line, judge_canary_traffic, settle_canary
from flows.night.clock import StageClock
from flows.night.collect import (
    Collected,
    collect,
    hold_out,
    summarize,
    trace_window,
    window_start,
)
from flows.night.criteria import (
    CriterionJudge,
    align_criterion,
    criterion_evidence,
    criterion_labels,
    weighted,
)
from flows.night.failed_night import record_failed_night
from flows.night.fast_slow import NightState, split_heldout
from flows.night.heldout_dataset import (
    heldout_items,
    heldout_runs,
    run_names,
    send_heldout_dataset,
)
from flows.night.label_read import read_labels
from flows.night.label_targets import commented, newest_labelled, teacher_corrections
from flows.night.night_settings import night_settings
from flows.night.registration import log_feedback, production_prompts, register_versions
from flows.night.retention import expire
from flows.night.runtime import Runtime
from flows.night.schedule import Schedule, evaluate_heldout
from flows.night.tasks import optimizing, served, stage
from flows.night.training_runs import judge_lora_dir
from flows.production import canary_release, serving
from flows.production.approval import ask_approval
from flows.production.criteria_gate import CriterionEvidence
from flows.production.gate import Evidence, PromotionDecision, decide
from flows.production.moves import recorded
from flows.production.must_pass import CaseResult, MustPassCase, configured_cases, run_cases
from flows.production.promotion import PRODUCTION, Move, decline
from flows.report.night_report import NightReport, Registered
from flows.report.progress import StageProgress
from flows.report.publish import publish
from flows.report.summary import render_markdown
from infra.agents.contract import require_offline
from infra.errors import is_transient
from infra.lm.adapter_base import servable_on, trained_on
from infra.settings import NightKnobs, Settings
from infra.traces.heldout_runs import HeldoutItem, HeldoutRun, SentRuns
from judges.align import Alignment
from judges.choose import JudgeGate, choose_judge, not_comparable
from judges.disagreements import disagreements
from judges.feedback import (
    NightVerdicts,
    judge_scores,
    judge_traces,
    label_requests,
    second_opinions,
)
from judges.injection import injection_check
from judges.judge import Judge
from judges.judge_head import JudgeHead
from judges.judge_lora import JudgeLora
from judges.pairwise import SEED_PAIRWISE_PROMPTS, PairwiseJudge
from judges.pairwise_gate import PairwiseEvidence, compare_replies
from judges.pointwise import SEED_JUDGE_PROMPTS
from judges.scaled_metric import check_ranked
from judges.versions import production_judge
from judges.watch import Watch, watch_judge
from weights.corrections import WrittenCorrections
from weights.round import ServedAdapter

log = logging.getLogger(__name__)


def _retrying(rt: Runtime, stage):
    """A stage that only talks to Langfuse or MLflow, retried as `[network]` says: a blip
    of a service waits, instead of failing the night. Compute stages are not retried: a
    failure there is no blip, and `--resume` redoes only what did not finish."""
    cfg = rt.settings.network
    return stage.with_options(
        retries=cfg.stage_retries,
        retry_delay_seconds=exponential_backoff(cfg.retry_delay_s),
        retry_condition_fn=_transient,
    )


def _check_failed_calls(rt: Runtime, stage: str) -> None:
    calls = night_calls(rt.call_tallies())
    if stage in calls:
        check_stage(stage, calls[stage], rt.settings.network.max_failed_share)


def _transient(task, task_run, state) -> bool:
    """Retry a timeout, a dropped connection, a 429 or a 5xx; not bad input."""
    error = state.result(raise_on_failure=False)
    return isinstance(error, BaseException) and is_transient(error)


@dataclass(frozen=True)
class Production:
    """What was in production when the night started: where it starts from, and the
    baseline its candidate must beat."""

    version: int | None  # the model version at alias "production"; None: none yet
    prompts: dict[str, str]  # its prompts, or the agent's seed prompts
    adapter: ServedAdapter | None = None  # its LoRA adapter, copied into the night's folder
    note: str = ""  # why its adapter was left out: tonight's model cannot serve it


@stage("read-production")
async def read_production(rt: Runtime, run_id: str) -> Production:
    """Read once per night, so that a resumed night compares against the same baseline."""
    seeds = rt.agent.seed_prompts()
    model = rt.settings.registry.model_name
    version = rt.registry.get_alias(model, PRODUCTION)
    prompts = production_prompts(rt.registry, list(seeds)) or seeds
    if rt.prompt_hub is not None:  # where the agent reads them: its production label wins
        prompts = prompts | {c: p.text for c, p in rt.prompt_hub.production().items()}
    if version is None:
        return Production(None, prompts)
    folder = rt.registry.download_adapter(model, version, rt.run_dir(run_id) / "production")
    if folder and not servable_on(rt.lm, folder):  # [lm] now names another model
        note = (
            f"Production v{version}'s adapter was trained on {trained_on(folder)}, which "
            "tonight's model cannot serve: the night started from its prompts alone, and its "
            "candidate was measured against them."
        )
        log.warning(note)
        return Production(version, prompts, note=note)
    adapter = ServedAdapter(f"production-v{version}", str(folder)) if folder else None
    return Production(version, prompts, adapter)


@stage("collect-traces")
async def collect_traces(rt: Runtime, run_id: str) -> Collected:
    """Tonight's traces, and every label to date: the labels the source gave from the last
    successful night's newest on, less `traces.label_overlap_hours` for those it listed
    late or people edited (on traces of any age), or all of them every
    `traces.label_full_read_days`, join the label store first."""
    cfg, name = rt.settings.traces, rt.settings.traces.annotation_name
    since, fetched_at = window_start(cfg.lookback_hours), datetime.now(UTC)
    # a source answers a whole listing at once: the count moves per listing read
    with StageProgress("collect traces", None, "records read") as progress:
        batch = rt.traces.fetch(since=since, limit=cfg.max_traces)
        progress.advance(len(batch.traces) + len(batch.annotations) + len(batch.corrections))
        have = {t.trace_id for t in batch.traces} | rt.labels.trace_ids()
        primary = read_labels(rt, name, batch, have, fetched_at)
        progress.advance(len(primary.fresh.traces) + len(primary.fresh.annotations))
        criteria = tuple(
            criterion_labels(rt, criterion, batch, have, since, fetched_at)
            for criterion in cfg.criteria
        )
    scale = rt.traces.score_scale(name, ordinal=rt.settings.judge.ordinal_categories)
    labels = primary.labels
    collected = collect(batch, rt.agent, name, since, fetched_at, scale, labels, cfg.max_text_chars)
    collected = hold_out(collected, rt.settings.eval.heldout_trace_share)
    seen = set(collected.skipped)  # a JSONL source reads the same files twice
    collected.skipped += [record for record in primary.fresh.skipped if record not in seen]
    collected.labels_new = primary.added
    # counted so that a store holding only older labels reads as that, not as no labels
    collected.labels_outside_window = primary.outside_window
    collected.labels_read_to = primary.read_to
    collected.labels_read_all = primary.read_all
    collected.criteria = criteria
    collected.labels_answered = len(rt.labels.requested() & {i.id for i in collected.items})
    # Before any stage spends budget, and in this stage so that a resumed night reads a
    # fixed score config again: a scale with no better or worse cannot steer the agent.
    check_ranked(collected.scale)
    return collected


@stage("watch-judge")
async def watch_judge_in_use(rt: Runtime, run_id: str, collected: Collected) -> Watch | None:
    """The judge in use on the labels made since its version, before they teach tonight's
    (None: no judge in use yet, one on another scale, or one whose adapter tonight's judge
    model cannot serve; the gate's reason says which)."""
    cfg = rt.settings.judge
    folder = rt.run_dir(run_id) / "judge-production"
    in_use = production_judge(rt.registry, list(SEED_JUDGE_PROMPTS), folder)
    if in_use is None or not_comparable(rt.judge_lm, in_use, collected.scale):
        return None
    with StageProgress("judge watch", None, "judge calls") as progress:
        return await watch_judge(
            rt.judge_lm,
            in_use,
            collected.items,
            collected.labelled_at,
            rt.settings.seed,
            cfg.max_agreement_drop,
            cfg.min_watch_labels,
            progress,
        )


@stage("align-judge")
async def align_judge(rt: Runtime, run_id: str, collected: Collected) -> Alignment:
    return await optimizing(
        "judge alignment",
        rt.settings.judge.max_metric_calls,
        lambda on_event: stages.align_judge_stage(
            rt, collected.items, collected.scale, on_event, rt.run_dir(run_id) / "gepa-judge"
        ),
    )


@stage("train-judge-adapter")
async def train_judge_adapter(
    rt: Runtime, run_id: str, alignment: Alignment, collected: Collected
) -> tuple[Alignment, JudgeLora]:
    with StageProgress("judge LoRA step", None, "steps") as progress:
        return await stages.judge_lora_stage(
            rt, alignment, collected.items, judge_lora_dir(rt, run_id), progress
        )


@stage("train-judge-head")
async def train_judge_head(
    rt: Runtime, run_id: str, alignment: Alignment, lora: JudgeLora, collected: Collected
) -> tuple[Alignment, JudgeHead]:
    with StageProgress("judge reward head", None, "items read and judged") as progress:
        return await stages.judge_head_stage(
            rt, alignment, lora, collected.items, rt.run_dir(run_id) / "judge-head", progress
        )


@stage("gate-judge")
async def gate_judge(
    rt: Runtime, run_id: str, alignment: Alignment, collected: Collected, watch: Watch | None
) -> JudgeGate:
    _, _, heldout = stages.judge_items_split(rt, collected.items)
    with StageProgress("judge gate and version", None, "judge calls") as progress:
        gate = await choose_judge(
            rt.judge_lm,
            rt.registry,
            run_id,
            alignment,
            heldout,
            collected.window,
            rt.settings.judge.min_agreement,
            rt.settings.seed,
            rt.settings.judge.min_heldout_labels,
            rt.run_dir(run_id) / "judge-production",
            progress,
        )
        check = await injection_check(
            rt.judge_lm,
            gate.judge,
            heldout,
            rt.settings.seed,
            rt.settings.judge.max_injection_flips,
            progress,
        )
    return replace(gate, watch=watch, injection=check)


@stage("align-criteria")
async def align_criteria(
    rt: Runtime, run_id: str, collected: Collected
) -> tuple[CriterionJudge, ...]:
    """Each secondary criterion's judge, fitted on its labels, gated and registered
    (`flows.night.criteria`)."""
    judged = []
    with StageProgress("criteria judges", None, "judge calls") as progress:
        for labels in collected.criteria:
            judged.append(await align_criterion(rt, run_id, labels, progress))
    return tuple(judged)


@stage("criteria-heldout")
async def criteria_heldout(
    rt: Runtime,
    run_id: str,
    criteria: tuple[CriterionJudge, ...],
    candidate: stages.Evaluation,
    production: stages.Evaluation,
) -> tuple[CriterionEvidence, ...]:
    """Each secondary criterion's judge on both versions' held-out replies: what the
    promotion gate checks for a criterion that fell."""
    with StageProgress("criteria on held-out replies", None, "judge calls"):
        return tuple([await criterion_evidence(rt, c, candidate, production) for c in criteria])


@stage("write-corrections")
async def write_corrections(
    rt: Runtime, run_id: str, collected: Collected, judge: Judge
) -> WrittenCorrections:
    """The teacher's corrections of the commented failing replies nobody corrected (the
    most recently labelled `corrections.max_per_night`), kept where tonight's judge
    passes them: weight steps train on them beside people's."""
    commented_ones, cfg = commented(collected), rt.settings.corrections
    asked = newest_labelled(commented_ones, collected.labelled_at, cfg.max_per_night)
    with StageProgress("teacher corrections", len(asked), "corrections written") as progress:
        written = await teacher_corrections(
            rt, collected, judge, cfg.max_tokens, asked, progress.advance
        )
    return replace(written, left=len(commented_ones) - len(asked))


@stage("register-versions")
async def register(rt: Runtime, run_id: str, report: NightReport) -> Registered:
    return register_versions(rt, run_id, report)


@stage("must-pass")
async def must_pass(
    rt: Runtime, run_id: str, state: NightState, cases: list[MustPassCase]
) -> list[CaseResult]:
    """The candidate on each must-pass case; one failure refuses it (`decide`)."""
    adapter = await served(rt, state.adapter)
    with StageProgress("must-pass cases", len(cases), "cases") as progress:
        results = await run_cases(
            rt.agent,
            rt.lm,
            rt.judge_lm,
            state.prompts,
            cases,
            adapter,
            rt.settings.agent_opt.max_tokens,
        )
        progress.advance(len(results))
    return results


@stage("pairwise-gate")
async def compare_side_by_side(
    rt: Runtime, run_id: str, candidate: stages.Evaluation, production: stages.Evaluation
) -> PairwiseEvidence:
    """The candidate's and production's replies to each held-out request, read side by side
    by the pairwise judge on the night's judge model (`judges.pairwise_gate`)."""
    judge = PairwiseJudge(rt.judge_lm, SEED_PAIRWISE_PROMPTS)
    shared = set(candidate.outputs) & set(production.outputs)
    with StageProgress("pairwise gate", 2 * len(shared), "judge calls"):
        return await compare_replies(
            judge,
            candidate.requests,
            candidate.outputs,
            production.outputs,
            rt.settings.promotion.resamples,
            rt.settings.seed,
        )


@stage("promote")
async def promote_candidate(
    rt: Runtime, run_id: str, version: int, decision: PromotionDecision, by: str
) -> Move:
    model = rt.settings.registry.model_name
    move = await serving.promote(
        serving.make_serving(rt.settings),
        rt.registry,
        model,
        version,
        rt.settings.promotion,
        by,
        decision=decision,
        hub=rt.prompt_hub,
    )
    description = f"flywheel night {run_id}: promotion"
    return await recorded(move, rt.registry, model, rt.prompt_hub, description)


@stage("publish-canary")
async def publish_canary(
    rt: Runtime, run_id: str, version: int, decision: PromotionDecision, by: str
) -> Move:
    """A candidate that passed goes out as the canary (`promotion.canary_share`), for the
    next night to promote or roll back on the traffic it served."""
    model = rt.settings.registry.model_name
    move = await canary_release.publish(
        serving.make_serving(rt.settings),
        rt.registry,
        model,
        version,
        rt.settings.promotion.canary_share,
        decision.reason,
        by,
        rt.prompt_hub,
    )
    description = f"flywheel night {run_id}: canary"
    return await recorded(move, rt.registry, model, rt.prompt_hub, description)


async def canary_out(
    rt: Runtime, run_id: str, clock: StageClock, collected: Collected, gate: JudgeGate
) -> str:
    """The canary an earlier night published, judged on the traffic it served and settled
    (promoted, rolled back or kept); its sentence for the report ("": none is out)."""
    work = judge_canary_traffic(rt, run_id, collected, gate.judge, gate.trusted)
    verdict = await clock.time("canary", work)
    if verdict is None:
        return ""
    settled = await _retrying(rt, settle_canary)(rt, run_id, verdict)
    return canary_line(verdict, settled)


async def _production_move(
    rt: Runtime, run_id: str, version: int, decision: PromotionDecision
) -> Move | None:
    """Promote a candidate that passed: at once (promotion.auto), or when a person approves
    it in Prefect within promotion.approval_timeout_s; with promotion.canary_share, publish
    it as the canary instead. None: production did not move."""
    cfg = rt.settings.promotion
    if not decision.passed:
        return None
    move = publish_canary if cfg.canary_share > 0 else promote_candidate
    if cfg.auto:
        by = f"flywheel night {run_id} (promotion.auto)"
        return await _retrying(rt, move)(rt, run_id, version, decision, by)
    if cfg.approval_timeout_s <= 0:
        return None
    answer = await ask_approval(version, decision.reason, cfg.approval_timeout_s)
    if answer is None:
        return None  # still open: `flywheel promote`
    by = answer.by or "a person in Prefect"
    if not answer.promote:
        return decline(rt.registry, rt.settings.registry.model_name, version, by)
    return await _retrying(rt, move)(rt, run_id, version, decision, by)


def night_evidence(
    evals: dict[str, stages.Evaluation], gate: JudgeGate, baseline: int | None
) -> Evidence:
    """The night's candidate (its best state) against what was in production, on the
    held-out examples the steps were not chosen on."""
    candidate, production = evals["candidate"], evals["seed"]
    return Evidence(
        candidate=candidate.scores,
        production=production.scores,
        slices=candidate.slices,
        by_labels=candidate.by_labels and production.by_labels,
        judge_trusted=gate.trusted,
        judge_drifted=gate.drifted,
        production_version=baseline,
    )


# The feedback stages raise on failure, so that Prefect caches only what succeeded and a
# resumed night retries the rest; `feedback.send_feedback` catches, and the night ends.


@stage("judge-night-traces")
async def judge_night_traces(
    rt: Runtime, run_id: str, collected: Collected, judge: Judge
) -> NightVerdicts:
    cfg = rt.settings.judge
    labelled, items = {item.id for item in collected.items}, collected.judged_items()
    # with rationales, each trace is read twice: its verdict, then its reason
    calls = len(items) * (2 if cfg.rationale_in_scores else 1)
    unit = "judge calls" if cfg.rationale_in_scores else "traces judged"
    with StageProgress("judge on the night's traces", calls, unit) as progress:
        verdicts = await judge_traces(
            rt.judge_lm,
            judge,
            items,
            labelled,
            cfg.rationale_max_tokens,
            cfg.rationale_in_scores,
            progress.advance,
        )
    split = stages.judge_items_split(rt, collected.items)
    parts = zip(("train", "val", "heldout"), split, strict=True)
    splits = {item.id: name for name, items in parts for item in items}
    verdicts.disagreements = disagreements(collected.items, verdicts, judge, splits)
    return verdicts


@stage("request-labels")
async def request_labels(
    rt: Runtime, run_id: str, verdicts: NightVerdicts, gate: JudgeGate, n: int
) -> int:
    """The n traces people should label next: where a drifted judge disagreed with recent
    labels first (a second label each), then where the judge is least sure."""
    pending = rt.traces.pending_label_requests()
    second = second_opinions(gate.watch, pending, n) if gate.drifted and gate.watch else []
    asked = second + label_requests(
        verdicts, gate.judge, n - len(second), pending | {r.trace_id for r in second}
    )
    sent = rt.traces.request_labels(asked)
    rt.labels.mark_requested([r.trace_id for r in asked], verdicts.judged_at)
    return sent


@stage("write-judge-scores")
async def write_judge_scores(
    rt: Runtime, run_id: str, verdicts: NightVerdicts, gate: JudgeGate
) -> int:
    name = rt.settings.traces.judge_score_name
    scores = judge_scores(verdicts, gate.judge, gate.trusted, run_id, name)
    return rt.traces.write_scores(scores)


@stage("heldout-dataset")
async def send_heldout_runs(
    rt: Runtime, run_id: str, items: list[HeldoutItem], runs: list[HeldoutRun], at: datetime
) -> SentRuns:
    return rt.traces.send_heldout_runs(rt.settings.traces.heldout_dataset, items, runs, at)


@flow(name="nightly", log_prints=True)
async def nightly(
    run_id: str, knobs: NightKnobs | None = None, runtime: Runtime | None = None
) -> NightReport:
    """One night. `knobs`: what it does (None: the settings'); `runtime`: what it runs on
    (None: built from the settings, which also give the models and services)."""
    rt = runtime or Runtime(Settings())
    rt = rt.with_knobs(knobs) if knobs is not None else rt
    # before any stage: a resume must not mix results of two settings in one night
    night_settings(rt.run_dir(run_id), rt.settings)
    clock = StageClock(check=lambda stage: _check_failed_calls(rt, stage))
    try:
        return await _night(rt, run_id, clock)
    except Exception as error:  # MLflow keeps what the finished stages measured, and why
        record_failed_night(rt, run_id, clock, night_calls(rt.call_tallies()), error)
        raise


async def _night(rt: Runtime, run_id: str, clock: StageClock) -> NightReport:
    start = time.perf_counter()
    require_offline(rt.agent, repr(rt.settings.agent))  # before anything calls it
    if (days := rt.settings.state.retention_days) is not None:
        results = Path(get_current_settings().results.local_storage_path)
        expire(rt.settings.state_dir, results, days)
    # production as a cut move meant it, before the night reads it as its baseline
    model, where = rt.settings.registry.model_name, serving.make_serving(rt.settings)
    await serving.finish_interrupted(where, rt.registry, model, rt.prompt_hub)
    collected = await clock.time("collect", _retrying(rt, collect_traces)(rt, run_id))
    # read now, so a bad case file stops the night before its hours of work, not after
    cases = configured_cases(rt.settings.promotion, rt.agent, rt.traces)
    watch = await clock.time("judge_watch", watch_judge_in_use(rt, run_id, collected))
    aligned = await clock.time("judge", align_judge(rt, run_id, collected))
    work = train_judge_adapter(rt, run_id, aligned, collected)
    aligned, judge_lora = await clock.time("judge_lora", work)
    work = train_judge_head(rt, run_id, aligned, judge_lora, collected)
    aligned, judge_head = await clock.time("judge_head", work)
    gate = await clock.time("judge_gate", gate_judge(rt, run_id, aligned, collected, watch))
    judge = gate.judge  # tonight's judge if it passed the gate, else the one in use
    criteria = ()
    if collected.criteria:
        criteria = await clock.time("criteria", align_criteria(rt, run_id, collected))
    # before production is read: a canary that won is production tonight
    canary = await canary_out(rt, run_id, clock, collected, gate)
    production = await _retrying(rt, read_production)(rt, run_id)
    heldout = rt.heldout_examples(collected.heldout)
    cfg = rt.settings.fast_slow
    selection, gated = split_heldout(heldout, cfg.selection_share, rt.settings.seed)

    async def held_out(label: str, state: NightState) -> stages.Evaluation:
        work = evaluate_heldout(rt, run_id, label, state, judge, gated)
        return await clock.time(f"eval_{label}", work)

    # production as it runs: its prompts with its adapter
    in_production = NightState(production.prompts, production.adapter)
    evals = {"seed": await held_out("seed", in_production)}
    # GEPA and the LoRA round against an untrusted judge would optimize noise
    optimize_agent = gate.trusted or rt.settings.judge.untrusted_night == "optimize"
    written = None
    if optimize_agent and rt.settings.corrections.enabled:
        work = write_corrections(rt, run_id, collected, judge)
        written = await clock.time("corrections", work)
        collected = replace(collected, written=written.kept)
    schedule = Schedule(
        rt,
        run_id,
        clock,
        collected,
        judge,
        selection,
        in_production,
        weighted=weighted(criteria),
    )
    steps = await schedule.run() if optimize_agent else []
    best = schedule.best
    unchanged = best == in_production
    evals["candidate"] = evals["seed"] if unchanged else await held_out("candidate", best)
    evidence = night_evidence(evals, gate, production.version)
    if criteria:
        work = criteria_heldout(rt, run_id, criteria, evals["candidate"], evals["seed"])
        evidence = replace(evidence, criteria=await clock.time("criteria_heldout", work))
    if rt.settings.promotion.pairwise and not evidence.by_labels and not unchanged:
        work = compare_side_by_side(rt, run_id, evals["candidate"], evals["seed"])
        evidence = replace(evidence, pairwise=await clock.time("pairwise", work))
    run_cases_now = cases and not unchanged  # production itself is no candidate to check
    checked = (
        await clock.time("must_pass", must_pass(rt, run_id, best, cases)) if run_cases_now else []
    )
    decision = decide(evidence, rt.settings.promotion, rt.settings.seed, unchanged, checked)
    report = NightReport(
        run_id=run_id,
        collected=summarize(collected),
        alignment=aligned,
        judge_lora=judge_lora,
        judge_head=judge_head,
        gate=gate,
        corrections=written,
        steps=steps,
        prompts=best.prompts,
        evals=evals,
        seconds=time.perf_counter() - start,
        stage_intervals=clock.intervals,
        evidence=evidence,
        promotion=decision,
        must_pass=checked,
        # the candidate's weights: a kept weight step's adapter, else production's carried on
        adapter_path=best.adapter.path if best.adapter else None,
        seed_prompts=production.prompts,
        calls=night_calls(rt.call_tallies()),
        trace_window=trace_window(collected.window),
        agent_optimized=optimize_agent,
        production_note=production.note,
        canary=canary,
        criteria=criteria,
    )
    registered = await clock.time("register", _retrying(rt, register)(rt, run_id, report))
    report = replace(report, registered=registered)
    # the night succeeded: the next one reads labels from its newest on (and an overlap)
    if collected.labels_read_to is not None:
        rt.labels.advance_watermark(
            rt.settings.traces.annotation_name,
            collected.labels_read_to,
            full_read=collected.labels_read_all,
        )
    for labels in collected.criteria:
        if labels.read_to is not None:
            rt.labels.advance_watermark(labels.name, labels.read_to, full_read=labels.read_all)
    moved = await _production_move(rt, run_id, registered.model_version, decision)
    report = replace(report, moved=moved)
    # production's adapter loaded, demoted ones past their grace period unloaded
    await serving.tidy(
        serving.make_serving(rt.settings), rt.registry, rt.settings.registry.model_name
    )
    wanted = feedback.labels_wanted(rt.settings.judge, gate.trusted)
    sent = await clock.time(
        "feedback",
        feedback.send_feedback(
            rt.settings.judge,
            judge.label,
            len(collected.examples),
            wanted,
            lambda: judge_night_traces(rt, run_id, collected, judge),
            lambda verdicts: _retrying(rt, request_labels)(rt, run_id, verdicts, gate, wanted),
            lambda verdicts: _retrying(rt, write_judge_scores)(rt, run_id, verdicts, gate),
        ),
    )
    report = replace(report, feedback=sent, calls=night_calls(rt.call_tallies()))
    # each version's held-out evaluation as a run of the trace source's dataset
    versions = {"seed": production.version, "candidate": registered.model_version}
    names = run_names(report.evals, rt.settings.registry.model_name, versions, run_id)
    at = collected.window.fetched_at or datetime.now(UTC)  # fixed: a resent score updates
    heldout_dataset = await clock.time(
        "heldout_dataset",
        send_heldout_dataset(
            rt.settings.traces.heldout_dataset,
            heldout_items(heldout, report.evals, {e.id for e in collected.heldout}),
            heldout_runs(report.evals, names),
            lambda items, runs: _retrying(rt, send_heldout_runs)(rt, run_id, items, runs, at),
        ),
    )
    report = replace(report, heldout_dataset=heldout_dataset)
    try:
        log_feedback(rt.registry, report)
    except Exception as err:  # the run already holds everything else
        log.error("could not add the feedback results to the MLflow run: %s", err)
    try:
        markdown = publish(rt.registry, rt.settings, rt.run_dir(run_id), report)
    except Exception as err:  # the night is registered: its report without pictures
        log.error("could not publish the night's report with its pictures: %s", err)
        markdown = render_markdown(report)
    await create_markdown_artifact(
        markdown=markdown, key="nightly-report", description=f"flywheel night {run_id}"
    )
    if sent.disagreements:
        await create_table_artifact(
            table=sent.disagreements,
            key="judge-disagreements",
            description=f"flywheel night {run_id}: where {judge.label} and people disagree",
        )
    return report
