"""Where to look next, as links in the night's report: its MLflow run, the versions it
registered, and the night before. An MLflow behind a file or sqlite store has no web
address until someone starts its UI, so the links then point at `mlflow ui`'s default
address and say the command that serves it."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

from flows.report.night_report import Registered

MLFLOW_UI_DEFAULT = "http://127.0.0.1:5000"


def mlflow_ui(tracking_uri: str) -> tuple[str, str]:
    """The UI's base address for this tracking URI, and how to open it ("" when it is
    already a server)."""
    if tracking_uri.startswith(("http://", "https://")):
        return tracking_uri.rstrip("/"), ""
    return MLFLOW_UI_DEFAULT, f"`mlflow ui --backend-store-uri {tracking_uri}` serves these links"


def run_url(base: str, experiment_id: str, run_id: str) -> str:
    return f"{base}/#/experiments/{experiment_id}/runs/{run_id}"


def night_links(
    registered: Registered, previous_run_id: str | None, previous_report: Path | None
) -> list[str]:
    """Markdown lines: the night's run, its model and prompt versions, the judge it ran
    on, and the night before (its run, and its page when it is still on this disk)."""
    base, how = mlflow_ui(registered.tracking_uri)
    experiment = registered.experiment_id
    model = quote(registered.model_name, safe="")
    lines = ["## Links", ""]
    if experiment:
        run = registered.mlflow_run_id
        lines.append(f"- MLflow run: [{run}]({run_url(base, experiment, run)})")
    lines.append(
        f"- model version: [{registered.model_name} v{registered.model_version}]"
        f"({base}/#/models/{model}/versions/{registered.model_version})"
    )
    for label, versions in (
        ("agent prompts", registered.prompt_versions),
        ("judge prompts", registered.judge_prompt_versions),
    ):
        shown = [
            f"[{name} v{v}]({base}/#/prompts/{quote(name, safe='')})"
            for name, v in versions.items()
        ]
        if shown:
            lines.append(f"- {label}: " + ", ".join(shown))
    if previous_run_id and experiment:
        lines.append(
            f"- the night before: [MLflow run]({run_url(base, experiment, previous_run_id)})"
        )
    if previous_report is not None and previous_report.exists():
        lines.append(f"- the night before's page: [{previous_report}]({previous_report.as_uri()})")
    if how:
        lines.append(f"- {how}")
    return lines + [""]
