"""What changed tonight, to look at: each GEPA run's best score (the judge's, each prompt
step's) against the metric calls it spent, and the texts it changed, as diffs from where
the night started."""

from __future__ import annotations

import difflib

# A bare Figure, not pyplot's: no display backend on a server, nothing kept globally
from matplotlib.figure import Figure

from flows.report.night_report import NightReport


def curves_figure(report: NightReport) -> Figure:
    """Best validation score against metric calls spent, one panel per GEPA stage."""
    stages = [
        ("judge alignment", report.alignment.curve, f"judge {report.alignment.primary} (val)"),
    ] + [
        (f"agent prompts, step {k}", stage.curve, "agent judge score (Pareto set)")
        for k, stage in report.prompt_steps
    ]
    figure = Figure(figsize=(10, 3.6), layout="constrained")
    axes = figure.subplots(1, len(stages), squeeze=False)[0]
    for axis, (title, curve, ylabel) in zip(axes, stages, strict=True):
        if curve:
            calls, best = zip(*curve, strict=True)
            axis.step(calls, best, where="post", marker="o", markersize=3)
        else:
            axis.text(0.5, 0.5, "no curve recorded", ha="center", transform=axis.transAxes)
        axis.set(title=title, xlabel="metric calls spent", ylabel=ylabel)
        axis.grid(alpha=0.3)
    figure.suptitle(f"flywheel night {report.run_id}: best candidate so far")
    return figure


def prompt_diffs(report: NightReport) -> str:
    """Markdown: each text the night changed, as a unified diff from its start (the
    seed rubric for the judge, production's prompts for the agent); unchanged ones named."""
    pairs = [
        ("judge", report.alignment.seed.prompts, report.alignment.judge.prompts),
        ("agent", report.seed_prompts, report.prompts),
    ]
    lines = ["## What the night changed", ""]
    for owner, before, after in pairs:
        for component in sorted(after):
            old, new = before.get(component, ""), after[component]
            title = f"{owner} `{component}`"
            if old == new:
                lines.append(f"- {title}: unchanged")
                continue
            diff = difflib.unified_diff(
                old.splitlines(), new.splitlines(), "before", "after", lineterm=""
            )
            lines += ["", f"### {title}", "", "```diff", *diff, "```", ""]
    return "\n".join(lines)
