"""The night's GEPA runs, as a picture: what did each search find, when, and from what?
Every candidate's validation score at the metric calls it was found at, the best so far
(the front's best, a staircase), and the winner's lineage back to the seed."""

from __future__ import annotations

import math
from dataclasses import dataclass

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from flows.report.night_report import NightReport
from flows.report.pictures.palette import BLACK, BLUE, ORANGE, SKY, VERMILLION, WIDTH
from gepa_opt import PoolEntry

COLUMNS = 3  # panels per row


@dataclass(frozen=True)
class Run:
    """One GEPA run of the night, as its panel draws it."""

    title: str
    score: str  # what its validation score measures, for the y axis
    curve: list[tuple[int, float]]  # (metric calls, best so far), as its events said
    pool: tuple[PoolEntry, ...] = ()
    metric_calls: int = 0  # what the run spent in all

    @property
    def drawable(self) -> bool:
        return bool(self.curve) or any(e.found_at is not None for e in self.pool)


def runs(report: NightReport) -> list[Run]:
    """The judge's alignment, then each prompt step of the schedule."""
    aligned = report.alignment
    out = [
        Run(
            "judge rubric (alignment)",
            "mean score on validation labels\n(agreement with people's labels)",
            aligned.curve,
            aligned.pool,
            aligned.metric_calls,
        )
    ]
    for k, stage in report.prompt_steps:
        out.append(
            Run(
                f"agent prompts, step {k}",
                "mean judge score on the Pareto set",
                stage.curve,
                stage.pool,
                stage.metric_calls,
            )
        )
    return out


def winner(pool: tuple[PoolEntry, ...]) -> int:
    """The highest validation score, the earliest on ties (GEPA's `best_idx`)."""
    return max(range(len(pool)), key=lambda k: (pool[k].val_score, -k))


def ancestry(pool: tuple[PoolEntry, ...], k: int) -> list[int]:
    """`k` and every candidate it descends from (both parents of a merge), in pool order."""
    seen, todo = set(), [k]
    while todo:
        current = todo.pop()
        if current not in seen:
            seen.add(current)
            todo += pool[current].parents
    return sorted(seen)


def staircase(pool: tuple[PoolEntry, ...]) -> list[tuple[int, float]]:
    """(metric calls, best score so far) each time a dated candidate raised the best."""
    dated = sorted(
        (e.found_at, k, e.val_score) for k, e in enumerate(pool) if e.found_at is not None
    )
    out: list[tuple[int, float]] = []
    for calls, _, score in dated:
        if not out or score > out[-1][1]:
            out.append((calls, score))
    return out


def figure(report: NightReport) -> Figure | None:
    """What did each of the night's GEPA searches find, and where did its winner come
    from? One panel per run (the judge's alignment, each prompt step): every candidate's
    validation score against the metric calls spent when it joined the pool, the best so
    far as a staircase, and the winner's lineage (its parents back to the seed) drawn as
    connected points. None: no run searched tonight."""
    drawn = [run for run in runs(report) if run.drawable]
    if not drawn:
        return None
    columns = min(len(drawn), COLUMNS)
    rows = math.ceil(len(drawn) / columns)
    fig = Figure(figsize=(WIDTH, 0.6 + 4.2 * rows), layout="constrained")
    axes = fig.subplots(rows, columns, squeeze=False).ravel()
    for axis, run in zip(axes, drawn, strict=False):
        _panel(axis, run)
    for axis in axes[len(drawn) :]:
        axis.set_visible(False)
    shown: dict[str, object] = {}  # one legend entry per label, from whichever panel has it
    for axis in axes[: len(drawn)]:
        for handle, label in zip(*axis.get_legend_handles_labels(), strict=True):
            shown.setdefault(label, handle)
    fig.legend(list(shown.values()), list(shown), loc="outside lower center", ncols=4)
    fig.suptitle(f"Night {report.run_id}: what each GEPA search found, and when")
    return fig


def _panel(axis: Axes, run: Run) -> None:
    pool = run.pool
    dated = [k for k, e in enumerate(pool) if e.found_at is not None]
    if dated:
        axis.scatter(
            [pool[k].found_at for k in dated],
            [pool[k].val_score for k in dated],
            color=SKY,
            edgecolors=BLUE,
            s=30,
            label="a candidate",
            zorder=2,
        )
    steps = staircase(pool) if dated else list(run.curve)
    if steps:
        end = max(run.metric_calls, steps[-1][0])
        calls, best = zip(*(steps + [(end, steps[-1][1])]), strict=True)
        axis.step(calls, best, where="post", color=BLUE, linewidth=1.5, label="best so far")
    if dated:
        _lineage(axis, pool)
    else:
        axis.text(
            0.5,
            0.08,
            "candidates not recorded (only the best so far)",
            ha="center",
            transform=axis.transAxes,
            fontsize="small",
        )
    undated = len(pool) - len(dated)
    if dated and undated:
        axis.text(
            0.98,
            0.02,
            f"{undated} found before a resume: not placed",
            ha="right",
            transform=axis.transAxes,
            fontsize="small",
        )
    axis.set_title(f"{run.title}: {len(pool) or 'no'} candidates" if pool else run.title)
    axis.set(xlabel="metric calls spent", ylabel=run.score)
    axis.margins(x=0.05, y=0.12)
    axis.grid(alpha=0.3)


def _lineage(axis: Axes, pool: tuple[PoolEntry, ...]) -> None:
    """The winner's ancestry as points joined parent to child; the winner and seed named."""
    best = winner(pool)
    line = [k for k in ancestry(pool, best) if pool[k].found_at is not None]
    for child in line:
        for parent in pool[child].parents:
            if pool[parent].found_at is None:
                continue
            axis.plot(
                [pool[parent].found_at, pool[child].found_at],
                [pool[parent].val_score, pool[child].val_score],
                color=VERMILLION,
                linewidth=1.5,
                zorder=3,
            )
    points = axis.scatter(
        [pool[k].found_at for k in line],
        [pool[k].val_score for k in line],
        color=VERMILLION,
        s=45,
        zorder=4,
        label="the winner's lineage",
    )
    points.set_gid("lineage")
    if pool[best].found_at is not None:
        axis.scatter(
            [pool[best].found_at],
            [pool[best].val_score],
            marker="*",
            s=260,
            color=ORANGE,
            edgecolors=BLACK,
            zorder=5,
            label="the winner",
        )
        axis.annotate(
            f"winner {pool[best].val_score:.3f}",
            (pool[best].found_at, pool[best].val_score),
            xytext=(0, 10),
            textcoords="offset points",
            ha="center",
            fontsize="small",
        )
    if pool and pool[0].found_at is not None and best != 0:
        axis.annotate(
            "seed",
            (pool[0].found_at, pool[0].val_score),
            xytext=(6, -4),
            textcoords="offset points",
            fontsize="small",
        )


def curves_figure(report: NightReport) -> Figure:
    """Best validation score against metric calls spent, one panel per GEPA stage (what
    the night logs to MLflow as optimization_curves.png)."""
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
