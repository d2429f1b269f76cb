"""The night's report, published where people look once the night is done: its pictures
and page in the night's MLflow run, `report.md` and `report.html` in the run's folder on
this disk (`flywheel status` names it), and the markdown with its pictures inline for
the Prefect artifact."""

from __future__ import annotations

import logging
from pathlib import Path

from flows.production.promotion import history
from flows.report.history import NIGHT_PREFIX, night_history
from flows.report.links import night_links
from flows.report.night_report import NightReport
from flows.report.page import PAGE, embed, page
from flows.report.pictures import night_pictures, png
from flows.report.summary import render_markdown
from infra.registry.mlflow_registry import Registry, RunInfo
from infra.settings import Settings

log = logging.getLogger(__name__)
NIGHTS_DRAWN = 30  # the trend's nights: a month of nightly runs


def publish(registry: Registry, settings: Settings, run_dir: Path, report: NightReport) -> str:
    """Write the report everywhere it goes; return its markdown with pictures inline.
    What cannot be had (the registry's history, a picture that fails to draw) leaves
    that part out, not the report."""
    try:
        runs = registry.recent_runs(NIGHTS_DRAWN, NIGHT_PREFIX)
        moves = history(registry, settings.registry.model_name)
    except Exception as err:  # a registry that went away: the report without its history
        log.warning("the report has no history of nights: %s", err)
        runs, moves = [], []
    try:
        figures = night_pictures(
            report, night_history(runs, moves), settings.promotion, settings.seed
        )
    except Exception as err:  # a picture is a view of the night, never the night's end
        log.warning("the report has no pictures: %s", err)
        figures = {}
    pictures = {name: png(figure) for name, figure in figures.items()}
    links = []
    if report.registered is not None:
        previous = _night_before(runs, report.run_id)
        page_before = run_dir.parent / _run_id(previous) / PAGE if previous else None
        try:
            links = night_links(
                report.registered, previous and previous.run_id, page_before, report.heldout_dataset
            )
        except Exception as err:  # a link is a way to look, never the report's end
            log.warning("the report has no links: %s", err)
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


def _run_id(run: RunInfo) -> str:
    return run.name.removeprefix(NIGHT_PREFIX)


def _night_before(runs: list[RunInfo], run_id: str) -> RunInfo | None:
    """The newest night other than this one (`runs`: newest first)."""
    return next((run for run in runs if _run_id(run) != run_id), None)
