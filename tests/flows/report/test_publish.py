"""The night's report as published: pictures and page in its MLflow run and its folder,
the trend read back from the registry, links to the night before."""

import json
import time
from dataclasses import replace
from datetime import datetime
from html.parser import HTMLParser
from pathlib import Path

import pytest

from flows.night.heldout_dataset import HeldoutDataset
from flows.production.promotion import HISTORY_TAG, history
from flows.report.history import NIGHT_PREFIX, night_history
from flows.report.night_report import Registered
from flows.report.publish import publish
from flows.report.status import render, status_data
from infra.registry.mlflow_registry import Registry
from infra.settings import Settings
from tests.flows.report.test_pictures import recorded_night


class _Images(HTMLParser):
    def __init__(self):
        super().__init__()
        self.sources: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.sources.append(dict(attrs)["src"])


def _night_run(registry: Registry, run_id: str, metrics: dict[str, float]) -> str:
    with registry.start_run(f"nightly-{run_id}", {"flywheel.run_id": run_id}) as run:
        registry.log_metrics(metrics)
    return run.info.run_id


def _two_nights(tmp_path):
    settings = Settings(state_dir=tmp_path / "state")
    registry = Registry(settings.mlflow)
    first = _night_run(
        registry,
        "20261204T020000Z",
        {"heldout_seed_accuracy": 0.4, "heldout_candidate_accuracy": 0.6, "judge_used_kappa": 0.5}
        | {"judge_used_threshold": 0.5, "promotion_gate_passed": 1.0},
    )
    time.sleep(1.1)  # moves are stamped to the second: this one after the first night began
    moved = datetime.now().astimezone().isoformat(timespec="seconds")
    registry.client.create_registered_model("agent")
    history = [{"action": "promoted", "version": 1, "at": moved, "by": "ana", "reason": "r"}]
    registry.client.set_registered_model_tag("agent", HISTORY_TAG, json.dumps(history))
    time.sleep(1.1)  # and before the second
    tonight = _night_run(
        registry,
        "20261205T020000Z",
        {"heldout_seed_judge_pass_rate": 0.6, "judge_used_kappa": 0.6}
        | {"promotion_gate_passed": 0.0},
    )
    return settings, registry, first, tonight


def test_the_trend_reads_each_night_and_the_move_after_it(tmp_path):
    _, registry, _, _ = _two_nights(tmp_path)
    first, second = night_history(
        registry.recent_runs(30, NIGHT_PREFIX), history(registry, "agent")
    )
    assert first.run_id == "20261204T020000Z" and second.run_id == "20261205T020000Z"
    assert (first.production_heldout, first.candidate_heldout) == (0.4, 0.6)
    assert second.production_heldout == 0.6  # no true labels: the judge's pass rate
    assert (first.judge_statistic, first.judge_agreement) == ("kappa", 0.5)
    assert first.event == "promoted" and first.version == 1
    assert second.event == "refused"  # its gate refused, nothing moved


@pytest.mark.parametrize("folder", ["absolute", "relative"])  # `.flywheel`: the default
def test_a_published_night_has_its_pictures_page_and_links_everywhere(
    tmp_path, monkeypatch, folder
):
    monkeypatch.chdir(tmp_path)
    settings, registry, first, tonight = _two_nights(tmp_path if folder == "absolute" else Path())
    runs = settings.state_dir / "runs"
    (runs / "20261204T020000Z").mkdir(parents=True)
    (runs / "20261204T020000Z" / "report.html").write_text("<html></html>")
    run_dir = runs / "20261205T020000Z"
    run_dir.mkdir()
    registered = Registered(
        tracking_uri="sqlite:///x.db",
        mlflow_run_id=tonight,
        prompt_versions={"agent.instructions": 2},
        judge_prompt_versions={},
        model_name="agent",
        model_version=2,
        with_adapter=False,
        experiment_id=registry.experiment_id,
    )
    heldout = HeldoutDataset(
        "flywheel-heldout",
        11,
        {"agent v2 (candidate), night 20261205T020000Z": 11},
        link="https://langfuse.example/project/p1/datasets/ds-1",
    )
    night = replace(
        recorded_night(),
        run_id="20261205T020000Z",
        registered=registered,
        heldout_dataset=heldout,
    )

    inline = publish(registry, settings, run_dir, night)

    names = ["gate.png", "judge.png", "gepa.png", "trend.png", "time.png"]
    page = _Images()
    page.feed((run_dir / "report.html").read_text())
    assert len(page.sources) == len(names)
    assert all(src.startswith("data:image/png;base64,") for src in page.sources)
    markdown = (run_dir / "report.md").read_text()
    assert all(f"]({name})" in markdown for name in names)  # beside it in MLflow
    assert inline.count("](data:image/png;base64,") == len(names)  # the Prefect artifact
    assert f"#/experiments/{registry.experiment_id}/runs/{first})" in markdown  # night before
    assert (runs / "20261204T020000Z" / "report.html").resolve().as_uri() in markdown
    # the held-out evaluations' Langfuse dataset runs: a sentence, and a link to them
    assert heldout.lines()[0] in markdown
    assert f"[flywheel-heldout]({heldout.link})" in markdown
    logged = {a.path for a in registry.client.list_artifacts(tonight)}
    assert set(names) | {"report.md", "report.html"} <= logged
    # `flywheel status` names the page while it is on this disk
    nights = status_data(registry, settings)["nights"]
    assert nights[0]["report"] == str((run_dir / "report.html").resolve())
    assert nights[1]["report"] == str((runs / "20261204T020000Z" / "report.html").resolve())
    assert f"    report: {nights[0]['report']}" in render(status_data(registry, settings))
