"""The nights so far, from the registry alone: each night's held-out scores, the judge's
agreement and what happened to production after it, for the picture of nights over
time. A night is its MLflow run (`nightly-<run id>`); a production move belongs to the
last night that started before it."""

from __future__ import annotations

from bisect import bisect_right
from datetime import UTC, datetime

from flows.report.pictures.trend import NightPoint
from infra.registry.mlflow_registry import RunInfo

NIGHT_PREFIX = "nightly-"  # a night's MLflow run is named for it: nightly-<run id>


def night_history(runs: list[RunInfo], moves: list[dict]) -> list[NightPoint]:
    """The nights of `runs` (`Registry.recent_runs` with `NIGHT_PREFIX`), oldest first,
    each with the last production move of `moves` (`promotion.history`) after it began."""
    runs = sorted(runs, key=lambda run: run.start_time)
    started = [datetime.fromtimestamp(run.start_time / 1000, UTC) for run in runs]
    after: dict[int, dict] = {}
    for move in moves:
        night = bisect_right(started, datetime.fromisoformat(move["at"])) - 1
        if night >= 0:
            after[night] = move  # the last move after a night is what it left
    points = []
    for i, run in enumerate(runs):
        statistic, agreement = _agreement(run.metrics)
        move = after.get(i)
        points.append(
            NightPoint(
                run_id=run.name.removeprefix(NIGHT_PREFIX),
                started=started[i],
                production_heldout=_heldout(run.metrics, "seed"),
                candidate_heldout=_heldout(run.metrics, "candidate"),
                judge_agreement=agreement,
                judge_statistic=statistic,
                event=move["action"] if move else _refused(run.metrics),
                version=move["version"] if move else None,
            )
        )
    return points


def _heldout(metrics: dict[str, float], stage: str) -> float | None:
    """True labels where the night had them, else its judge's pass rate."""
    for kind in ("accuracy", "judge_pass_rate"):
        if (value := metrics.get(f"heldout_{stage}_{kind}")) is not None:
            return value
    return None


def _agreement(metrics: dict[str, float]) -> tuple[str, float | None]:
    for key, value in sorted(metrics.items()):
        if key.startswith("judge_used_") and key != "judge_used_threshold":
            return key.removeprefix("judge_used_"), value
    return "", None


def _refused(metrics: dict[str, float]) -> str | None:
    return "refused" if metrics.get("promotion_gate_passed") == 0.0 else None
