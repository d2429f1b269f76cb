"""What a night did, as data: built once its stages are done, then completed with what
was registered and what went back to the trace source. `flows.report.summary` renders it."""

from __future__ import annotations

from dataclasses import dataclass, field

from flows.night.calls import call_metrics
from flows.night.criteria import CriterionJudge
from flows.night.fast_slow import Step
from flows.night.feedback import Feedback
from flows.night.heldout_dataset import HeldoutDataset
from flows.night.stages import Evaluation, PromptStage
from flows.production.criteria_gate import CriterionVerdict
from flows.production.gate import Evidence, PromotionDecision
from flows.production.must_pass import CaseResult
from flows.production.promotion import CANDIDATE, Move
from infra.lm import StageCalls
from judges.align import Alignment
from judges.choose import JudgeGate
from judges.judge_head import JudgeHead
from judges.judge_lora import JudgeLora
from judges.watch import Watch
from weights.corrections import WrittenCorrections
from weights.round import LoraRound


@dataclass(frozen=True)
class Registered:
    tracking_uri: str
    mlflow_run_id: str
    prompt_versions: dict[str, int]  # registered prompt name -> version
    judge_prompt_versions: dict[str, int]  # the judge the night ran on
    model_name: str
    model_version: int
    with_adapter: bool

    candidate: bool = True  # alias "candidate" moved to it: it passed the promotion gate
    experiment_id: str = ""  # the MLflow experiment the run is in (links to it)
    # the candidate's versions where the agent reads its prompts: "name vN" -> Langfuse page
    hub_prompts: dict[str, str] = field(default_factory=dict)
    # each held-out evaluation's MLflow evaluation run: "seed"/"candidate" -> its run id
    evaluation_runs: dict[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        prompts = ", ".join(f"{name} v{v}" for name, v in self.prompt_versions.items())
        judge = ", ".join(f"{name} v{v}" for name, v in self.judge_prompt_versions.items())
        adapter = (
            "prompts + LoRA adapter" if self.with_adapter else "prompts only (no adapter kept)"
        )
        alias = f"alias '{CANDIDATE}'" if self.candidate else "no alias (the gate refused it)"
        return (
            f"Registered in MLflow ({self.tracking_uri}): model {self.model_name} "
            f"v{self.model_version} ({adapter}), prompts {prompts}, {alias}, "
            f"judged by {judge or 'an unregistered judge'}; run {self.mlflow_run_id}."
        )


@dataclass(frozen=True)
class NightReport:
    run_id: str
    collected: dict[str, int]
    alignment: Alignment  # tonight's aligned judge beside the seed rubric
    gate: JudgeGate  # which judge the night ran on (tonight's or the one in use), and why
    steps: list[Step]  # the fast-slow schedule's steps, as they ran
    prompts: dict[str, str]  # the candidate's: the best state's prompts
    evals: dict[str, Evaluation]  # "seed" (production) and "candidate", on the gate's slice
    seconds: float
    stage_intervals: dict[str, tuple[float, float]] = field(default_factory=dict)
    adapter_path: str | None = None  # the candidate's adapter: tonight's or production's
    evidence: Evidence | None = None  # the candidate against production, held-out, paired
    promotion: PromotionDecision | None = None  # the gate's decision on that evidence
    must_pass: list[CaseResult] = field(default_factory=list)  # the candidate's, each case
    registered: Registered | None = None
    moved: Move | None = None  # what the night did to production, or the canary it published
    feedback: Feedback | None = None  # label requests and judge scores sent back
    # the held-out evaluations as the trace source's dataset runs (None: not sent yet)
    heldout_dataset: HeldoutDataset | None = None
    seed_prompts: dict[str, str] = field(default_factory=dict)  # where the agent started
    calls: dict[str, StageCalls] = field(default_factory=dict)  # model calls per stage
    # the traces the night fetched: "since" (ISO time, or "all") and "fetched_at"
    trace_window: dict[str, str] = field(default_factory=dict)
    agent_optimized: bool = True  # False: the judge was untrusted, the schedule did not run
    judge_lora: JudgeLora | None = None  # the judge's LoRA step, after prompt alignment
    judge_head: JudgeHead | None = None  # the judge's reward-head step, after the LoRA step
    # the teacher's corrections of commented failing replies (None: not written tonight)
    corrections: WrittenCorrections | None = None
    production_note: str = ""  # production's adapter left out: tonight's model cannot serve it
    canary: str = ""  # what the night did with the canary out before it, in one sentence
    criteria: tuple[CriterionJudge, ...] = ()  # each secondary criterion's judge, gated

    @property
    def prompt_steps(self) -> list[tuple[int, PromptStage]]:
        return [(s.index, s.prompt) for s in self.steps if s.prompt is not None]

    @property
    def weight_steps(self) -> list[tuple[int, LoraRound]]:
        return [(s.index, s.lora) for s in self.steps if s.lora is not None]

    @property
    def judge_trusted(self) -> bool:
        """Whether the judge the agent was optimized against agrees enough with the humans."""
        return self.gate.trusted

    def metrics(self) -> dict[str, float]:
        """Flat numbers for MLflow: before/after of every stage."""
        out = trace_metrics(self.collected) | alignment_metrics(self.alignment)
        if self.judge_lora is not None:
            out |= judge_lora_metrics(self.judge_lora)
        if self.judge_head is not None:
            out |= judge_head_metrics(self.judge_head)
        if self.gate.watch is not None:
            out |= watch_metrics(self.gate.watch)
        if (check := self.gate.injection) is not None:
            out |= {
                "judge_injection_judged_fail": float(check.judged_fail),
                "judge_injection_flipped_share": check.share,
            }
        if (written := self.corrections) is not None:
            out |= {
                "corrections_written_asked": float(written.asked),
                "corrections_written_kept": float(len(written.kept)),
                "corrections_written_refused": float(written.refused),
            }
        out |= seconds_metrics(self.stage_intervals)
        for step in self.steps:
            out |= step_metrics(step)
        prompt_stages = [stage for _, stage in self.prompt_steps]
        out |= {
            "judge_trusted": float(self.judge_trusted),
            "steps_kept": float(sum(s.decision.kept for s in self.steps)),
            "agent_metric_calls": float(sum(p.metric_calls for p in prompt_stages)),
            "agent_reflection_calls": float(sum(p.reflection_calls for p in prompt_stages)),
            "wall_seconds": self.seconds,
        }
        used, previous = self.gate.judge, self.gate.previous
        out["judge_gate_passed"] = float(self.gate.decision.passed)
        out[f"judge_used_{used.primary}"] = used.heldout_score
        out["judge_used_threshold"] = used.threshold
        if previous:
            out[f"judge_previous_{previous.primary}"] = previous.heldout_score
        if self.promotion:
            out["promotion_gate_passed"] = float(self.promotion.passed)
            out["heldout_gain_over_production"] = self.promotion.gain
            if self.promotion.low is not None:
                out["heldout_gain_low"] = self.promotion.low
                out["heldout_gain_high"] = self.promotion.high
        if self.evidence and self.evidence.pairwise:
            out["pairwise_win_rate"] = self.evidence.pairwise.win_rate
            out["pairwise_position_flips"] = self.evidence.pairwise.flip_rate
        if self.must_pass:
            out["must_pass_failed"] = float(sum(not case.passed for case in self.must_pass))
        if self.feedback:
            out |= self.feedback.metrics()
        out |= call_metrics(self.calls)
        for stage, ev in self.evals.items():
            out |= heldout_metrics(stage, ev)
        verdicts = self.promotion.criteria if self.promotion else ()
        return out | criteria_metrics(self.criteria, verdicts)


# A stage's numbers, named once: a whole night's report and a failed night's run
# (`flows.night.failed_night`) log the same names.


def trace_metrics(summary: dict[str, int]) -> dict[str, float]:
    return {f"traces_{k}": float(v) for k, v in summary.items()}


def alignment_metrics(aligned: Alignment) -> dict[str, float]:
    out: dict[str, float] = {}
    for prefix, judge in (("judge_seed", aligned.seed), ("judge_aligned", aligned.judge)):
        out |= {f"{prefix}_{k}": v for k, v in judge.heldout.items()}
    primary = aligned.primary
    return out | {
        "judge_metric_calls": aligned.metric_calls,
        "judge_threshold": aligned.judge.threshold,
        f"judge_val_{primary}_best": aligned.val_score,
        f"judge_val_{primary}_seed": aligned.seed_val_score,
        "judge_kept_seed": float(aligned.kept_seed),
        "judge_unparseable_verdicts": float(aligned.unparseable),
        "judge_refused_proposals": float(aligned.refused),
    }


def criteria_metrics(
    criteria: tuple[CriterionJudge, ...], verdicts: tuple[CriterionVerdict, ...]
) -> dict[str, float]:
    """Each secondary criterion's numbers, prefixed by its name: its judge's held-out
    agreement and gate, and its held-out mean for production and the candidate."""
    out: dict[str, float] = {}
    for criterion in criteria:
        prefix, judge = f"criterion_{criterion.name}_", criterion.judge
        out[f"{prefix}judge_{judge.primary}"] = judge.heldout_score
        out[f"{prefix}judge_gate_passed"] = float(criterion.gate.decision.passed)
        out[f"{prefix}judge_trusted"] = float(criterion.trusted)
    for verdict in verdicts:
        if verdict.gain is None:
            continue
        prefix = f"criterion_{verdict.name}_"
        out[f"{prefix}heldout_production"] = verdict.production
        out[f"{prefix}heldout_candidate"] = verdict.candidate
        out[f"{prefix}heldout_gain"] = verdict.gain.value
        out[f"{prefix}dropped"] = float(verdict.dropped)
    return out


def watch_metrics(watch: Watch) -> dict[str, float]:
    """The judge in use on the labels made since its version (`judges.watch`); with none
    there is no statistic to chart, only the count."""
    out = {
        f"judge_watch_{watch.primary}_registered": watch.made_with,
        "judge_watch_labels": float(watch.labels),
        "judge_watch_dropped": float(watch.dropped),
    }
    return out | ({f"judge_watch_{watch.primary}": watch.score} if watch.labels else {})


def judge_lora_metrics(step: JudgeLora) -> dict[str, float]:
    out = {"judge_lora_records": float(step.records), "judge_lora_kept": float(bool(step.kept))}
    out["judge_lora_memory_notes"] = float(step.memory)
    if step.records:
        out |= {"judge_lora_seconds": step.seconds, "judge_lora_val_rubric": step.rubric_val}
    if step.best_val is not None:
        out["judge_lora_val_best"] = step.best_val
    return out


def judge_head_metrics(step: JudgeHead) -> dict[str, float]:
    """The reward-head step (`judges.judge_head`): labels, validation kappa of the head and
    of the judge it had to beat, kept or not, seconds."""
    out = {
        "judge_head_kept": float(bool(step.kept)),
        "judge_head_labels": float(step.labels),
        "judge_head_memory_notes": float(step.memory),
        "judge_head_val_so_far": step.so_far_val,
        "judge_head_seconds": step.seconds,
    }
    if step.val is not None:
        out["judge_head_val"] = step.val
    if step.strength is not None:
        out["judge_head_strength"] = step.strength
    return out


def prompt_metrics(prompt: PromptStage, prefix: str) -> dict[str, float]:
    return {
        f"{prefix}_judge_unparseable_verdicts": float(prompt.judge_unparseable),
        f"{prefix}_refused_proposals": float(prompt.refused),
        f"{prefix}_metric_calls": prompt.metric_calls,
        f"{prefix}_reflection_calls": prompt.reflection_calls,
        f"{prefix}_proposals": prompt.proposals,
        f"{prefix}_proposals_differed": prompt.differed,
        f"{prefix}_proposals_accepted": prompt.accepted,
        f"{prefix}_candidates": prompt.candidates,
        f"{prefix}_val_seed": prompt.seed_val,
        f"{prefix}_val_best": prompt.best_val,
    }


def lora_metrics(lora: LoraRound, prefix: str) -> dict[str, float]:
    out = {f"{prefix}_records": float(lora.records), f"{prefix}_val_without": lora.val_without}
    if lora.val_with is not None:
        out[f"{prefix}_val_with"] = lora.val_with
    if lora.train_loss is not None:
        out[f"{prefix}_train_loss"] = lora.train_loss
    if lora.train_steps:
        out[f"{prefix}_train_steps"] = float(lora.train_steps)
        out[f"{prefix}_seconds_per_train_step"] = lora.train_seconds / lora.train_steps
    return out


def step_metrics(step: Step) -> dict[str, float]:
    """A step's decision and what it ran, as step<k>_*: its score before and after where
    steps are chosen, and its GEPA run (step<k>_agent_*) or LoRA round (step<k>_lora_*)."""
    prefix = f"step{step.index}"
    out = {f"{prefix}_kept": float(step.decision.kept)}
    for name in ("before", "after"):
        if (value := getattr(step.decision, name)) is not None:
            out[f"{prefix}_{name}"] = value
    if step.prompt is not None:
        out |= prompt_metrics(step.prompt, f"{prefix}_agent")
    if step.lora is not None:
        out |= lora_metrics(step.lora, f"{prefix}_lora")
    return out


def heldout_metrics(stage: str, ev: Evaluation) -> dict[str, float]:
    out = {}
    if ev.judge_pass_rate is not None:
        out[f"heldout_{stage}_judge_pass_rate"] = ev.judge_pass_rate
    if ev.accuracy is not None:
        out[f"heldout_{stage}_accuracy"] = ev.accuracy
    return out


def seconds_metrics(intervals: dict[str, tuple[float, float]]) -> dict[str, float]:
    return {f"{name}_seconds": end - begin for name, (begin, end) in intervals.items()}
