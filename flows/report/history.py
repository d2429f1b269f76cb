"""The nights so far, from the registry alone: each night's held-out scores, the judge's
agreement and what happened to production after it, for the picture of nights over
time. A night is its MLflow run (`nightly-<run id>`); a production move belongs to the
last night that started before it."""

from __future__ import annotations

from bisect import bisect_right
from datetime import UTC, datetime

from flows.production.promotion import history
from flows.report.pictures.trend import NightPoint
from infra.registry.mlflow_registry import Registry

NIGHT_PREFIX = "nightly-"


def night_history(registry: Registry, model: str, limit: int = 30) -> list[NightPoint]:
    """The last `limit` nights, oldest first."""
    runs = registry.recent_runs(limit, name_prefix=NIGHT_PREFIX)
    runs.sort(key=lambda run: run.start_time)
    started = [datetime.fromtimestamp(run.start_time / 1000, UTC) for run in runs]
    moves: dict[int, dict] = {}
    for move in history(registry, model):
        at = datetime.fromisoformat(move["at"])
        night = bisect_right(started, at) - 1
        if night >= 0:
            moves[night] = move  # the last move after a night is what it left
    return [
        NightPoint(
            run_id=run.name.removeprefix(NIGHT_PREFIX),
            started=started[i],
            production_heldout=_heldout(run.metrics, "seed"),
            candidate_heldout=_heldout(run.metrics, "candidate"),
            judge_agreement=_agreement(run.metrics)[1],
            judge_statistic=_agreement(run.metrics)[0],
            event=moves[i]["action"] if i in moves else _refused(run.metrics),
            version=moves[i]["version"] if i in moves else None,
        )
        for i, run in enumerate(runs)
    ]


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
