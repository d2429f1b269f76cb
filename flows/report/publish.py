"""The night's report, published where people look once the night is done: its pictures
and page in the night's MLflow run, `report.md` and `report.html` in the run's folder on
this disk (`flywheel status` names it), and the markdown with its pictures inline for
the Prefect artifact."""

from __future__ import annotations

import logging
from pathlib import Path

from flows.report.history import NIGHT_PREFIX, night_history
from flows.report.links import night_links
from flows.report.night_report import NightReport
from flows.report.page import embed, page, png
from flows.report.pictures import night_pictures
from flows.report.summary import render_markdown
from infra.registry.mlflow_registry import Registry
from infra.settings import Settings

log = logging.getLogger(__name__)
PAGE = "report.html"
NIGHTS_DRAWN = 30  # the trend's nights: a month of nightly runs


def publish(registry: Registry, settings: Settings, run_dir: Path, report: NightReport) -> str:
    """Write the report everywhere it goes; return its markdown with pictures inline.
    What the registry cannot give (history, the night before) leaves those parts out
    rather than the report."""
    try:
        history = night_history(registry, settings.registry.model_name, NIGHTS_DRAWN)
        before = [
            run
            for run in registry.recent_runs(3, NIGHT_PREFIX)
            if run.name != f"{NIGHT_PREFIX}{report.run_id}"
        ]
    except Exception as err:  # a registry that went away: the report without its history
        log.warning("the report has no history of nights: %s", err)
        history, before = [], []
    figures = night_pictures(report, history, settings.promotion, settings.seed)
    pictures = {name: png(figure) for name, figure in figures.items()}
    links = []
    if report.registered is not None:
        previous = before[0] if before else None
        previous_page = (
            run_dir.parent / previous.name.removeprefix(NIGHT_PREFIX) / PAGE if previous else None
        )
        links = night_links(report.registered, previous and previous.run_id, previous_page)
    markdown = render_markdown(report, list(pictures), links)
    html = page(f"flywheel night {report.run_id}", markdown, pictures)
    (run_dir / "report.md").write_text(markdown)
    (run_dir / PAGE).write_text(html)
    if report.registered is not None:
        with registry.reopen_run(report.registered.mlflow_run_id):
            for name, figure in figures.items():
                registry.log_figure(figure, name)
            registry.log_text(markdown, "report.md")
            registry.log_text(html, PAGE)
    return embed(markdown, pictures)
