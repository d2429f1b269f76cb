"""Where to look next, as links in the night's report: its MLflow run, the versions it
registered (in MLflow, and in Langfuse where the agent reads its prompts), the Langfuse
dataset its held-out evaluations went to, and the night before; and in a production
move's record, the version production now holds. An MLflow behind a file or sqlite store
has no web address until someone starts its UI, so the links then point at `mlflow ui`'s
default address and say the command that serves it."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

from flows.night.heldout_dataset import HeldoutDataset
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


def model_version_url(base: str, model: str, version: int) -> str:
    return f"{base}/#/models/{quote(model, safe='')}/versions/{version}"


def hub_line(label: str, pages: dict[str, str]) -> list[str]:
    """One markdown line of Langfuse prompt versions ("name vN" -> its page), a version
    whose page is unknown as plain text; none when there are none."""
    shown = [f"[{name}]({url})" if url else name for name, url in pages.items()]
    return [f"- {label}: " + ", ".join(shown)] if shown else []


def move_links(tracking_uri: str, model: str, version: int, hub_pages: dict[str, str]) -> list[str]:
    """Markdown lines for a production move: the model version production now holds and
    the Langfuse prompt versions labelled production with it."""
    base, how = mlflow_ui(tracking_uri)
    lines = [f"- model version: [{model} v{version}]({model_version_url(base, model, version)})"]
    lines += hub_line("Langfuse prompts (label production)", hub_pages)
    return lines + ([f"- {how}"] if how else [])


def night_links(
    registered: Registered,
    previous_run_id: str | None,
    previous_report: Path | None,
    heldout: HeldoutDataset | None = None,
) -> list[str]:
    """Markdown lines: the night's run, its model and prompt versions, the judge it ran
    on, the held-out dataset its evaluations went to (where it has a page), and the night
    before (its run, and its page when it is still on this disk)."""
    base, how = mlflow_ui(registered.tracking_uri)
    experiment = registered.experiment_id
    lines = ["## Links", ""]
    if experiment:
        run = registered.mlflow_run_id
        lines.append(f"- MLflow run: [{run}]({run_url(base, experiment, run)})")
    lines.append(
        f"- model version: [{registered.model_name} v{registered.model_version}]"
        f"({model_version_url(base, registered.model_name, registered.model_version)})"
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
    if experiment and registered.evaluation_runs:
        shown = [
            f"[{'production' if label == 'seed' else label}]({run_url(base, experiment, run)})"
            for label, run in registered.evaluation_runs.items()
        ]
        lines.append("- held-out evaluations (MLflow evaluation runs): " + ", ".join(shown))
    if heldout is not None and heldout.link and heldout.runs:
        lines.append(
            f"- held-out evaluations (Langfuse dataset runs): [{heldout.dataset}]({heldout.link})"
        )
    lines += hub_line("Langfuse prompts (label candidate)", registered.hub_prompts)
    if previous_run_id and experiment:
        lines.append(
            f"- the night before: [MLflow run]({run_url(base, experiment, previous_run_id)})"
        )
    if previous_report is not None and previous_report.exists():
        # the state folder may be relative (`.flywheel`, the default): a URI is absolute
        uri = previous_report.resolve().as_uri()
        lines.append(f"- the night before's page: [{previous_report}]({uri})")
    if how:
        lines.append(f"- {how}")
    return lines + [""]
