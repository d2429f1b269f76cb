"""A week of nights (issue 57): seven consecutive real nights over a changing stream, as a
scheduler runs them (`flywheel run`: the embedded 135M model, sqlite MLflow, Prefect's
own server), with small budgets: `benchmarks.week`'s scenario. After every night the
invariants hold: it ended (or was resumed) without an exception, production moved only
through the gate or by hand, every label is in the store exactly once, the budget held,
nothing was registered twice, and `flywheel status` says what MLflow holds."""

from __future__ import annotations

import json
import sqlite3

import mlflow
import pytest
from mlflow import MlflowClient

from benchmarks.week import HAND, SMALL, Week, judge_label, night_rows, run_week, table
from flows.production.promotion import production_stack

pytestmark = pytest.mark.slow

AGENT_BUDGET = int(SMALL["FLYWHEEL_AGENT_OPT__MAX_METRIC_CALLS"])


def stored_labels(week: Week) -> list[tuple[str, float]]:
    with sqlite3.connect(week.state / "labels.sqlite") as db:
        rows = db.execute("select annotation_id, annotation from labels").fetchall()
    return [(annotation_id, json.loads(raw)["value"]) for annotation_id, raw in rows]


def check_invariants(week: Week, day: int) -> None:
    """What must hold after every night, whatever the day brought."""
    client = MlflowClient(week.tracking_uri)
    status = week.status(day)

    # every label the source holds is in the store exactly once, as people last left it
    stored = stored_labels(week)
    assert len(stored) == len({i for i, _ in stored}), f"day {day}: a label stored twice"
    expected = {s["id"]: s["value"] for s in week.stream.scores}
    assert dict(stored) == expected, f"day {day}: the store differs from the source"

    # nothing registered twice: one agent version and one night run per night at most
    per_night = [v.tags["flywheel.run_id"] for v in client.search_model_versions("name='agent'")]
    assert len(per_night) == len(set(per_night)) and set(per_night) <= set(week.nights.values())
    experiments = [e.experiment_id for e in client.search_experiments()]
    roots = client.search_runs(experiments, "attributes.run_name LIKE 'nightly-%'")
    names = [r.info.run_name for r in roots if "mlflow.parentRunId" not in r.data.tags]
    assert len(names) == len(set(names)) == len(week.nights), names
    (tonight,) = [r for r in roots if r.info.run_name == f"nightly-{week.nights[day]}"]

    # the budget held
    assert tonight.data.metrics.get("agent_metric_calls", 0) <= AGENT_BUDGET

    # production moved only through the gate or by hand, and is what its history says
    moves = status["history"]
    for move in moves:
        by_gate = move["by"].endswith("(promotion.auto)")
        assert by_gate or move["by"] == HAND, move
        if move["action"] == "promoted":
            tags = client.get_model_version("agent", str(move["version"])).tags
            assert tags["flywheel.gate.passed"] == "true", (move, tags)
    stack = production_stack(moves)
    production = _alias(client, "agent", "production")
    assert production == (stack[-1] if stack else None), (production, moves)

    # `flywheel status` says what MLflow holds: production and the judge in use
    shown = status["production"]["version"] if status["production"] else None
    assert shown == production
    for name, version in status["judge"].items():
        assert client.get_prompt_version_by_alias(name, "judge-production").version == version


def _alias(client: MlflowClient, model: str, alias: str) -> int | None:
    try:
        return int(client.get_model_version_by_alias(model, alias).version)
    except mlflow.exceptions.MlflowException:
        return None


def test_a_week_of_nights_never_crashes_and_production_moves_only_as_it_should(tmp_path):
    week = Week(tmp_path, SMALL)
    asked_before: list[int] = []

    def after(day: int) -> None:
        check_invariants(week, day)
        report = week.report(day)
        if day == 1:
            assert week.status(1)["judge"], "the first night's judge took production"
        if day == 2:  # the second `make demo` of issue 57: a quiet day, said and skipped
            assert "no traces in the night's window" in report
            assert "Judge watch: no labels made since" in report
            # and the same labels align the same judge again: production's is kept
            assert "no label newer than those" in report, report
        if day == 3:  # ten labels new to the judge in use: too few to tell drift
            assert "too few to tell (judge.min_watch_labels = 15)" in report, report
            asked_before.append(len(week.outbox("label_requests")))
        if day == 4:
            # the drifted labels: Wednesday's traces, each against the judge's verdict
            assert len(week.verdicts) >= 10 and len(set(week.verdicts.values())) == 2
            in_use = judge_label(week.status(3)["judge"])
            assert f"Judge watch: {in_use} on the" in report, report
            assert "it is not trusted" in report, report
            # people are asked first for a second label where it disagreed with the labels
            # new to it (Wednesday's ten and Thursday's; not where a label was asked for
            # already, on Wednesday), most of them the drifted ones
            asked = week.outbox("label_requests")[asked_before[0] :]
            second = [r["objectId"] for r in asked if r["reason"].startswith("second label")]
            assert second and [r["objectId"] for r in asked[: len(second)]] == second, asked
            assert set(second) <= set(week.stream.traces_of(3)), second
            assert len(set(second) & set(week.verdicts)) > len(second) / 2, second
        if day == 7:
            assert len(week.stream.late) == 5  # and the store holds them (the invariants)

    run_week(week, after)
    print(table(night_rows(week)))  # the benchmark's table, on the test's budgets
