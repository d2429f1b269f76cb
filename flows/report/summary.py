"""What a night did, for people: the closing summary, the Prefect artifact, MLflow."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from flows.night.criteria import CriterionJudge
from flows.night.fast_slow import KIND_NAMES
from flows.night.stages import PromptStage
from flows.production.canary_release import PUBLISHED
from flows.production.criteria_gate import CriterionVerdict
from flows.report.figures import prompt_diffs
from flows.report.night_report import NightReport
from infra.agents.tool_policy import tally

# The primary agreement statistics (`judges.agreement.primary_metric`), for people.
STATISTICS = {"kappa": "κ", "weighted_kappa": "weighted κ", "spearman": "Spearman ρ"}


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def _unreadable(count: int) -> str:
    """Said only when it happened: a verdict the judge wrote but nobody could read."""
    return f", {count} unreadable judge verdicts (scored 0)" if count else ""


def _refused(count: int) -> str:
    """Said only when it happened: proposals no metric call was spent on."""
    if not count:
        return ""
    return f", {count} proposals refused (they restated the meta-prompt or addressed the judge)"


def _conflicting(count: int) -> str:
    """Said only when it happened: traces whose people disagree, which nobody learns from."""
    if not count:
        return ""
    return (
        f" {count} traces have contradicting labels from different people: left out until settled."
    )


def _outside_window(count: int) -> str:
    """Said only when it happened: a store of old labels only reads as no labels otherwise."""
    if not count:
        return ""
    return f" {count} stored labels are older than judge.label_window_days: left out."


def summary_rows(report: NightReport) -> list[tuple[str, str, str, str]]:
    a = report.alignment
    seed, aligned = a.seed.heldout, a.judge.heldout
    rows = [
        (
            f"judge {STATISTICS[a.primary]} (held-out)",
            _fmt(seed.get(a.primary)),
            _fmt(aligned.get(a.primary)),
            f"{a.metric_calls} metric calls, {a.sizes['heldout']} held-out labels"
            + _unreadable(a.unparseable)
            + _refused(a.refused),
        ),
        (
            "judge accuracy (held-out)",
            _fmt(seed.get("accuracy")),
            _fmt(aligned.get("accuracy")),
            "",
        ),
    ]
    for index, stage in report.prompt_steps:
        rows.append(
            (
                f"step {index}: agent judge score (Pareto set)",
                _fmt(stage.seed_val),
                _fmt(stage.best_val),
                f"{stage.metric_calls} metric calls, {stage.candidates} candidates"
                + _proposals(stage)
                + _unreadable(stage.judge_unparseable)
                + _refused(stage.refused),
            )
        )
    for step in report.steps:
        d = step.decision
        rows.append(
            (
                f"step {step.index} ({KIND_NAMES[step.kind]}): selection score",
                _fmt(d.before),
                _fmt(d.after),
                f"{'kept' if d.kept else 'dropped'}, {step.seconds:.0f} s",
            )
        )
    seed, candidate = report.evals["seed"], report.evals["candidate"]
    rows.append(
        (
            "held-out accuracy, production → candidate",
            _fmt(seed.accuracy),
            _fmt(candidate.accuracy),
            f"{candidate.n} examples the steps were not chosen on"
            + (f", {candidate.failed} left out (model calls failed)" if candidate.failed else ""),
        )
    )
    return rows


def tool_line(report: NightReport) -> str | None:
    """How the candidate's held-out replay answered its tool calls, if it made any."""
    candidate = report.evals.get("candidate")
    if candidate is None or not candidate.tool_steps:
        return None
    return (
        "Tool calls in the candidate's held-out replay: "
        f"{tally(Counter(candidate.tool_steps))} (reused: the trace's own result; looked up: "
        "another trace's; simulated: replay.tool_functions; stopped: judged on the call)."
    )


def _proposals(stage: PromptStage) -> str:
    """How many proposals were new texts, and how many of those joined the pool."""
    if not stage.proposals:
        return ""
    return (
        f"; {stage.differed} of {stage.proposals} proposals differed from their parent, "
        f"{stage.accepted} accepted"
    )


def judge_lines(report: NightReport) -> list[str]:
    """The gate's decision, the judge the night ran on, and what went back to the source."""
    g, used = report.gate, report.gate.judge
    verdict = "passed" if g.decision.passed else "failed"
    counts = report.collected
    out = [
        f"Labels: the judge learned from {counts.get('annotations', 0)} to date, "
        f"{counts.get('annotations_new', 0)} of them new tonight; "
        f"{counts.get('annotations_answered', 0)} answer the judge's label requests."
        + _conflicting(counts.get("annotations_conflicting", 0))
        + _outside_window(counts.get("annotations_outside_window", 0)),
        *([g.watch.line()] if g.watch else []),
        *([g.injection.line()] if g.injection else []),
        *judge_lora_lines(report),
        *judge_head_lines(report),
        f"Judge gate {verdict}: {g.decision.reason}.",
        f"Judge version: registered {g.registered_label}; the night ran on {used.label} "
        f"(held-out {STATISTICS[used.primary]} {used.heldout_score:.3f}, {used.cut}).",
    ]
    if report.feedback:
        out += report.feedback.lines()
    return out


def criteria_lines(report: NightReport) -> list[str]:
    """The secondary criteria, one line each: its judge's held-out agreement, its held-out
    score for production and the candidate, and what the promotion gate made of it."""
    verdicts = {v.name: v for v in (report.promotion.criteria if report.promotion else ())}
    out = []
    for criterion in report.criteria:
        out.append(_criterion_line(criterion, verdicts.get(criterion.name)))
        if (watch := criterion.gate.watch) is not None:  # its judge in use, as the primary's
            out.append(f"Criterion {criterion.name}: {watch.line()}")
    return out


def _criterion_line(criterion: CriterionJudge, verdict: CriterionVerdict | None) -> str:
    judge, gate = criterion.judge, criterion.gate.decision
    said = (
        f"Criterion {criterion.name} (weight {criterion.weight:g}, max_drop "
        f"{criterion.max_drop:g}): judge {judge.label}, held-out "
        f"{STATISTICS[judge.primary]} {judge.heldout_score:.3f} "
        f"(judge gate {'passed' if gate.passed else 'failed'}"
        f"{'' if criterion.trusted else ', untrusted'})"
    )
    if verdict is None or verdict.gain is None:
        return said + "; not measured: no held-out reply was judged for both versions."
    held = (
        f"; held-out production {verdict.production:.3f} -> candidate "
        f"{verdict.candidate:.3f} ({verdict.gain.value:+.3f} on {verdict.examples})"
    )
    if not criterion.trusted:
        return (
            said + held + ": not checked, its judge is not trusted (it neither blocks nor passes)."
        )
    if verdict.dropped:
        return said + held + ": fell beyond its max_drop, the gate refused the candidate."
    return said + held + ": within its max_drop."


def judge_lora_lines(report: NightReport) -> list[str]:
    """The judge's LoRA step: what it trained on, what each checkpoint agreed, kept or not."""
    step = report.judge_lora
    if step is None:
        return []
    if not step.records:
        return [f"Judge LoRA step: not run; {step.note}."]
    read = ", ".join(f"{name} {kappa:.3f}" for name, kappa in step.checkpoints.items())
    kappa = step.heldout.get("kappa", report.alignment.judge.heldout_score)
    parts = "rubric, adapter and memory" if step.memory else "rubric plus adapter"
    outcome = f"kept: the judge is {parts} (held-out κ {kappa:.3f})"
    if report.judge_head is not None and report.judge_head.kept:
        outcome = f"kept (held-out κ {kappa:.3f}), then replaced by the reward head below"
    shown = f" with {step.memory} reviewers' notes per exchange" if step.memory else ""
    return [
        f"Judge LoRA step: {step.records} records{shown}, {step.seconds:.0f} s of training; "
        f"validation κ per checkpoint {read} against the rubric alone's {step.rubric_val:.3f}; "
        f"{outcome if step.kept else step.note}."
    ]


def corrections_lines(report: NightReport) -> list[str]:
    """What the weight steps learned from people's labels: their own corrections, and the
    ones the teacher wrote from their comments."""
    written, counts = report.corrections, report.collected
    if written is None:
        return []
    lost = [
        f"{n} {why}"
        for n, why in (
            (written.refused, "the judge failed"),
            (written.empty, "empty or the reply itself"),
            (written.failed, "calls failed"),
        )
        if n
    ]
    return [
        f"Corrections: {counts.get('corrections', 0)} written by people; the teacher wrote "
        f"{written.asked} from reviewers' comments and {len(written.kept)} passed the judge"
        + (f" ({', '.join(lost)})" if lost else "")
        + (
            f"; {written.left} older comments left (corrections.max_per_night)"
            if written.left
            else ""
        )
        + "."
    ]


def judge_head_lines(report: NightReport) -> list[str]:
    """The judge's reward-head step: labels, its validation κ against the judge so far's,
    kept or not, seconds."""
    step = report.judge_head
    if step is None:
        return []
    if step.val is None:
        return [f"Judge head step: not run; {step.note}."]
    shown = f", reading {step.memory} reviewers' notes per exchange" if step.memory else ""
    if step.kept:
        kappa = report.alignment.judge.heldout_score
        outcome = (
            f"kept: refitted on {step.labels} training and validation labels"
            + (f" and {step.planted} planted instructions" if step.planted else "")
            + ", the judge is "
            f"rubric plus head (held-out κ {kappa:.3f})"
        )
    else:
        outcome = step.note
    return [
        f"Judge head step: a head on the judge model's features{shown}, fitted on the "
        f"training labels (C {step.strength:g}), {step.seconds:.0f} s; validation κ "
        f"{step.val:.3f} against {step.so_far}'s {step.so_far_val:.3f}; {outcome}."
    ]


def _untrusted_because(report: NightReport) -> str:
    """Why the judge the night ran on is not trusted: too few held-out labels to measure it
    (a quiet week, a new project) is not the same news as a judge that agrees too little."""
    used, decision = report.gate.judge, report.gate.decision
    if not decision.enough_labels:
        if not decision.labels:
            return "no held-out labels to measure it on"
        return (
            f"only {decision.labels} held-out labels to measure it on "
            f"(judge.min_heldout_labels = {decision.min_labels})"
        )
    gate = report.gate
    statistic = f"held-out {STATISTICS[used.primary]} {used.heldout_score:.3f}"
    if not used.heldout_score >= decision.floor:
        return f"{statistic} < {decision.floor}"
    if gate.drifted and gate.watch is not None:
        drop = gate.watch.drop
        return f"{gate.watch.judge} drifted from people's recent labels ({drop:.3f} lost)"
    if gate.injection is not None and gate.injection.fooled:
        check = gate.injection
        return (
            f"an instruction appended to a reply turned {check.share:.0%} of its fail verdicts "
            f"to pass (judge.max_injection_flips {check.max_share}), though its {statistic}"
        )
    return statistic  # trusted by every measure: not a reason, and not reached


def notes(report: NightReport) -> list[str]:
    out = []
    a = report.alignment
    if not report.judge_trusted and report.agent_optimized:
        out.append(
            f"Judge not trusted: {_untrusted_because(report)}. The agent was optimized "
            'against it anyway (judge.untrusted_night = "optimize"), and this version is '
            "registered with flywheel.judge_trusted=false: do not promote it."
        )
    elif not report.judge_trusted:
        out.append(
            f"Judge not trusted: {_untrusted_because(report)}, so the agent was not optimized "
            "tonight (GEPA and the LoRA round would have optimized noise): the night spent its "
            "time on the judge and asked people for more labels. It runs the agent's steps "
            'again once a judge reaches the floor (judge.untrusted_night = "optimize" runs '
            "them regardless)."
        )
    if report.canary:
        out.append(report.canary)
    if report.production_note:
        out.append(report.production_note)
    if report.evals["seed"].n == 0:
        out.append(
            "No held-out examples: set eval.heldout_path to a JSONL of requests with true "
            'answers ({"id", "inputs", "reference"} per line), eval.dataset to a Langfuse '
            "dataset, or eval.heldout_trace_share to hold out a share of the traces; without "
            "them nothing is measured against production, and nothing can be promoted."
        )
    if a.skipped:
        out.append(f"{a.skipped}.")
    if a.kept_seed:
        below = (
            f", below the {a.floor:.2f} a rubric needs to replace it (judge.min_agreement)"
            if a.below_floor
            else ""
        )
        out.append(
            f"Judge: kept the seed rubric; GEPA's best had validation {STATISTICS[a.primary]} "
            f"{a.val_score:.3f} vs the seed's {a.seed_val_score:.3f}{below}."
        )
    out += [f"Schedule {step.line()}." for step in report.steps]
    out += [
        f"LoRA round of step {k}: {lora.train_steps} optimizer steps, "
        f"{lora.train_seconds / lora.train_steps:.1f} s each"
        f"{f' on {lora.train_device}' if lora.train_device else ''}."
        for k, lora in report.weight_steps
        if lora.train_steps
    ]
    out += [f"LoRA round of step {k}: {lora.note}" for k, lora in report.weight_steps if lora.note]
    return out


def promotion_lines(report: NightReport) -> list[str]:
    """The promotion gate's decision, and what happened to production."""
    if report.promotion is None:
        return []
    verdict = "passed" if report.promotion.passed else "refused the candidate"
    out = [f"Promotion gate {verdict}: {report.promotion.reason}."]
    if report.must_pass:
        passed = sum(case.passed for case in report.must_pass)
        out.append(f"Must-pass cases: the candidate passed {passed} of {len(report.must_pass)}.")
    if report.moved is not None:
        went = "Canary" if report.moved.action == PUBLISHED else "Production"
        out.append(f"{went}: {report.moved.line()}.")
    elif report.promotion.passed and report.registered is not None:
        version = report.registered.model_version
        out.append(
            f"Production unchanged: v{version} awaits approval (promotion.auto is off): "
            f"`flywheel promote {version}`."
        )
    return out


def fault_lines(report: NightReport) -> list[str]:
    """Model calls per stage, said only when some failed (retried or for good)."""
    faulty = {s: f for s, f in report.calls.items() if f.attempts_failed or f.failed}
    if not faulty:
        return []
    out = [
        "Model call faults (failed attempts were retried; calls that failed for good are "
        "left out of every score):"
    ]
    for stage, f in faulty.items():
        attempts = ", ".join(f"{n} {kind}" for kind, n in sorted(f.attempts_failed.items()))
        out.append(
            f"- {stage}: {f.calls} calls, failed attempts: {attempts or 'none'}; "
            f"failed for good: {f.failed}"
        )
    return out


def call_table(report: NightReport) -> list[str]:
    """Model calls per stage: tokens, cost at the settings' prices, and faults."""
    if not report.calls:
        return []
    out = [
        "| stage | model calls | prompt tokens | completion tokens | cost USD "
        "| failed attempts (retried) | failed for good |",
        "|---|---|---|---|---|---|---|",
    ]
    for stage, c in report.calls.items():
        attempts = sum(c.attempts_failed.values())
        out.append(
            f"| {stage} | {c.calls:,} | {c.prompt_tokens:,} | {c.completion_tokens:,} "
            f"| {c.cost_usd:.4f} | {attempts} | {c.failed} |"
        )
    return out


def disagreement_table(report: NightReport, rows: int = 10) -> list[str]:
    """The judge against people on the night's labelled traces, most confident first."""
    found = report.feedback.disagreements if report.feedback else []
    if not found:
        return []
    out = [
        f"The judge disagrees with people on {len(found)} labelled traces "
        f"(all of them: judge_disagreements.json in MLflow; the {min(rows, len(found))} "
        "it was surest of here):",
        "",
        "| trace | split | people | judge | judge score | request | comment |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in found[:rows]:
        cells = [row[k] for k in ("trace", "split", "people", "judge", "judge_score")]
        cells += [_cell(str(row["request"])), _cell(str(row["comment"]))]
        out.append("| " + " | ".join(str(c) for c in cells) + " |")
    return out


def _cell(text: str, limit: int = 80) -> str:
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def print_summary(report: NightReport, console: Console | None = None) -> None:
    console = console or Console()
    table = Table(title=f"flywheel night {report.run_id} ({report.seconds:.0f} s)")
    for column in ("", "before", "after", "notes"):
        table.add_column(column)
    for row in summary_rows(report):
        table.add_row(*row)
    console.print(table)
    for line in judge_lines(report) + criteria_lines(report):
        console.print(line, markup=False)
    for line in corrections_lines(report):
        console.print(line, markup=False)
    for note in notes(report):
        console.print(note, style="yellow", markup=False)
    for line in fault_lines(report):
        console.print(line, style="yellow", markup=False)
    if table := disagreement_table(report):
        console.print(table[0], markup=False)
    skipped = report.collected.get("skipped_records", 0)
    if skipped:
        console.print(
            f"[yellow]{skipped} malformed trace or score records were skipped (see the log)."
        )
    if replay := report.collected.get("not_replayable", 0):
        console.print(
            f"[yellow]{replay} traces could not be replayed: a tool in them took a replayed "
            "step's text output as its arguments, and tools are never re-run (see the log)."
        )
    if line := tool_line(report):
        console.print(line, markup=False)
    if report.registered:
        console.print(report.registered.describe())
    if report.heldout_dataset:
        for line in report.heldout_dataset.lines():
            console.print(line, markup=False)
    for line in promotion_lines(report):
        console.print(line, markup=False)


# what each of the night's pictures shows (`flows.report.pictures`), as its caption
CAPTIONS = {
    "gate.png": "The promotion gate: held-out gain over production, overall and per slice",
    "judge.png": "The judge against people: held-out labels, calibration, agreement per night",
    "gepa.png": "What each GEPA search found, and when",
    "trend.png": "Nights over time: production, its candidates and the judge",
    "time.png": "Where the night's time went",
}


def render_markdown(
    report: NightReport, pictures: Sequence[str] = (), links: Sequence[str] = ()
) -> str:
    """The report for people; `pictures`: file names beside it (`CAPTIONS`), drawn after
    the summary table; `links`: lines that lead on (`flows.report.links`), last."""
    lines = [
        f"# flywheel night `{report.run_id}`",
        "",
        "| | before | after | notes |",
        "|---|---|---|---|",
    ]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in summary_rows(report)]
    for name in pictures:
        lines += ["", f"![{CAPTIONS.get(name, name)}]({name})"]
    lines += [""] + judge_lines(report) + criteria_lines(report)
    lines += corrections_lines(report)
    lines += [""] + notes(report)
    if calls := call_table(report):
        lines += [
            "",
            "Model calls per stage (calls that failed for good are left out of every score):",
            "",
        ] + calls
    if table := disagreement_table(report):
        lines += [""] + table
    if line := tool_line(report):
        lines += ["", line]
    if report.registered:
        lines += ["", report.registered.describe()]
    if report.heldout_dataset:
        lines += report.heldout_dataset.lines()
    lines += promotion_lines(report)
    lines += ["", prompt_diffs(report)]
    if links:
        lines += ["", *links]
    return "\n".join(lines)
