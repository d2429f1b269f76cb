"""What a night did, for people: the closing summary, the Prefect artifact, MLflow."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from flows.annotation_scale import describe
from flows.stages import Evaluation, JudgeStage, LoraStage, PromptStage

if TYPE_CHECKING:
    from flows.feedback import Feedback
    from flows.judge_gate import JudgeGate
    from flows.registration import Registered

# The primary agreement statistics (`judges.scaled_align.primary_metric`), for people.
STATISTICS = {"kappa": "κ", "weighted_kappa": "weighted κ", "spearman": "Spearman ρ"}


@dataclass
class NightReport:
    run_id: str
    collected: dict[str, int]
    judge: JudgeStage
    prompt: PromptStage
    lora: LoraStage
    evals: dict[str, Evaluation]  # "seed", "prompts", and "lora" when a round ran
    seconds: float
    registered: Registered | None = None
    stage_intervals: dict[str, tuple[float, float]] = field(default_factory=dict)
    gate: JudgeGate | None = None  # which judge the night ran on, and why
    feedback: Feedback | None = None  # label requests and judge scores sent back

    @property
    def judge_trusted(self) -> bool:
        """Whether the judge the agent was optimized against agrees enough with the humans."""
        return self.gate.judge.trusted if self.gate else self.judge.trusted

    def metrics(self) -> dict[str, float]:
        """Flat numbers for MLflow: before/after of every stage."""
        out: dict[str, float] = {f"traces_{k}": float(v) for k, v in self.collected.items()}
        for prefix, report in (
            ("judge_seed", self.judge.seed_heldout),
            ("judge_aligned", self.judge.heldout),
        ):
            out |= {f"{prefix}_{k}": v for k, v in report.items()}
        primary = self.judge.primary
        out |= {
            "judge_metric_calls": self.judge.metric_calls,
            "judge_threshold": self.judge.threshold,
            f"judge_val_{primary}_best": self.judge.val_score,
            f"judge_val_{primary}_seed": self.judge.seed_val_score,
            "judge_kept_seed": float(self.judge.kept_seed),
            "judge_unparseable_verdicts": float(self.judge.unparseable),
            "agent_judge_unparseable_verdicts": float(self.prompt.judge_unparseable),
            "judge_trusted": float(self.judge_trusted),
            "agent_metric_calls": self.prompt.metric_calls,
            "agent_reflection_calls": self.prompt.reflection_calls,
            "agent_candidates": self.prompt.candidates,
            "agent_val_seed": self.prompt.seed_val,
            "agent_val_best": self.prompt.best_val,
            "lora_records": self.lora.records,
            "lora_val_without": self.lora.val_without,
            "wall_seconds": self.seconds,
        }
        out |= {
            f"{name}_seconds": end - begin for name, (begin, end) in self.stage_intervals.items()
        }
        if self.gate:
            out["judge_gate_passed"] = float(self.gate.decision.passed)
            out[f"judge_used_{self.gate.judge.primary}"] = self.gate.judge.heldout_score
            out["judge_used_threshold"] = self.gate.judge.threshold
            if self.gate.previous:
                out[f"judge_previous_{self.gate.previous.primary}"] = (
                    self.gate.previous.heldout_score
                )
        if self.feedback:
            out |= self.feedback.metrics()
        if self.lora.val_with is not None:
            out["lora_val_with"] = self.lora.val_with
        if self.lora.train_loss is not None:
            out["lora_train_loss"] = self.lora.train_loss
        for stage, ev in self.evals.items():
            out[f"heldout_{stage}_judge_pass_rate"] = ev.judge_pass_rate
            if ev.accuracy is not None:
                out[f"heldout_{stage}_accuracy"] = ev.accuracy
        return out


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def _unreadable(count: int) -> str:
    """Said only when it happened: a verdict the judge wrote but nobody could read."""
    return f", {count} unreadable judge verdicts (scored 0)" if count else ""


def summary_rows(report: NightReport) -> list[tuple[str, str, str, str]]:
    j = report.judge
    rows = [
        (
            f"judge {STATISTICS[j.primary]} (held-out)",
            _fmt(j.seed_heldout.get(j.primary)),
            _fmt(j.heldout.get(j.primary)),
            f"{j.metric_calls} metric calls, {j.sizes['heldout']} held-out labels"
            + _unreadable(j.unparseable),
        ),
        (
            "judge accuracy (held-out)",
            _fmt(j.seed_heldout.get("accuracy")),
            _fmt(j.heldout.get("accuracy")),
            "",
        ),
        (
            "agent judge score (Pareto set)",
            _fmt(report.prompt.seed_val),
            _fmt(report.prompt.best_val),
            f"{report.prompt.metric_calls} metric calls, {report.prompt.candidates} candidates"
            + _unreadable(report.prompt.judge_unparseable),
        ),
    ]
    seed = report.evals["seed"]
    for stage in ("prompts", "lora"):
        if stage in report.evals:
            ev = report.evals[stage]
            rows.append(
                (
                    f"held-out accuracy after {stage}",
                    _fmt(seed.accuracy),
                    _fmt(ev.accuracy),
                    f"{ev.n} examples with true labels",
                )
            )
    return rows


def judge_lines(report: NightReport) -> list[str]:
    """The gate's decision, the judge the night ran on, and what went back to the source."""
    out = []
    if report.gate:
        g = report.gate
        verdict = "passed" if g.decision.passed else "failed"
        out.append(f"Judge gate {verdict}: {g.decision.reason}.")
        used = g.judge
        cut = (
            f"threshold {used.threshold:.3f}"
            if used.scale.kind == "boolean"
            else f"{describe(used.scale)} scale"
        )
        out.append(
            f"Judge version: registered {g.registered_label}; the night ran on {used.label} "
            f"(held-out {STATISTICS[used.primary]} {used.heldout_score:.3f}, {cut})."
        )
    if report.feedback:
        out += report.feedback.lines()
    return out


def notes(report: NightReport) -> list[str]:
    out = []
    j = report.judge
    statistic = STATISTICS[j.primary]
    if not report.judge_trusted:
        score = report.gate.judge.heldout_score if report.gate else j.heldout_score
        out.append(
            f"Judge not trusted: held-out {statistic} {score:.3f} < {j.floor}. The agent was "
            "optimized against it anyway, and this version is registered with "
            "flywheel.judge_trusted=false: do not promote it."
        )
    if j.kept_seed:
        out.append(
            f"Judge: kept the seed rubric; GEPA's best had validation {statistic} "
            f"{j.val_score:.3f} vs the seed's {j.seed_val_score:.3f}."
        )
    if report.lora.note:
        out.append(f"LoRA round: {report.lora.note}")
    return out


def print_summary(report: NightReport, console: Console | None = None) -> None:
    console = console or Console()
    table = Table(title=f"flywheel night {report.run_id} ({report.seconds:.0f} s)")
    for column in ("", "before", "after", "notes"):
        table.add_column(column)
    for row in summary_rows(report):
        table.add_row(*row)
    console.print(table)
    for line in judge_lines(report):
        console.print(line, markup=False)
    for note in notes(report):
        console.print(note, style="yellow", markup=False)
    skipped = report.collected.get("skipped_records", 0)
    if skipped:
        console.print(
            f"[yellow]{skipped} malformed trace or score records were skipped (see the log)."
        )
    if report.registered:
        console.print(report.registered.describe())


def render_markdown(report: NightReport) -> str:
    lines = [
        f"# flywheel night `{report.run_id}`",
        "",
        "| | before | after | notes |",
        "|---|---|---|---|",
    ]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in summary_rows(report)]
    lines += [""] + judge_lines(report)
    lines += [""] + notes(report)
    if report.registered:
        lines += ["", report.registered.describe()]
    return "\n".join(lines)
