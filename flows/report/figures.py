"""What changed tonight, to read: the texts the night changed, as diffs from where it
started. Its pictures are `flows.report.pictures`."""

from __future__ import annotations

import difflib

from flows.report.night_report import NightReport


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
