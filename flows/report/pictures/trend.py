"""Nights over time, as a picture: is production getting better on the held-out
examples, is the judge still agreeing with people, and when did production move?"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from matplotlib.axes import Axes
from matplotlib.dates import AutoDateLocator, ConciseDateFormatter, DateFormatter
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from flows.report.pictures.palette import BLUE, GREEN, GREY, ORANGE, VERMILLION, WIDTH

Event = Literal["promoted", "rolled back", "refused"]


@dataclass(frozen=True)
class NightPoint:
    """One night as the trend draws it (the caller reads them from the registry)."""

    run_id: str
    started: datetime
    production_heldout: float | None  # production's mean held-out score that night
    candidate_heldout: float | None  # the night's candidate's, on the same examples
    judge_agreement: float | None  # the night's judge's held-out primary statistic
    judge_statistic: str  # which one, e.g. "kappa"
    event: Event | None = None  # what happened to production that night, if anything
    version: int | None = None  # the version promoted, rolled back to, or refused


# How each event is marked, on the production line and as a line across both panels.
MARKS: dict[str, tuple[str, str]] = {
    "promoted": ("^", GREEN),
    "rolled back": ("v", VERMILLION),
    "refused": ("X", GREY),
}


def date_axis(axis: Axes, times: Sequence[datetime]) -> None:
    """Dates people read ("Dec 03", "14:00" within a day); a single night (or nights
    within the hour) is one tick at its date and time, with a day's room each side."""
    if times and max(times) - min(times) < timedelta(hours=1):
        axis.set_xlim(min(times) - timedelta(days=1), max(times) + timedelta(days=1))
        axis.set_xticks([min(times)])
        axis.xaxis.set_major_formatter(DateFormatter("%Y-%m-%d %H:%M"))
        return
    locator = AutoDateLocator(minticks=3, maxticks=8)
    axis.xaxis.set_major_locator(locator)
    axis.xaxis.set_major_formatter(ConciseDateFormatter(locator))


def figure(history: Sequence[NightPoint]) -> Figure | None:
    """Is production getting better, night after night, and does the judge that measures
    it still agree with people? Production's held-out score per night (the candidate's
    beside it), each promotion, rollback and refusal marked, and the judge's held-out
    agreement. None: no nights."""
    if not history:
        return None
    nights = sorted(history, key=lambda p: p.started)
    times = [p.started for p in nights]
    fig = Figure(figsize=(WIDTH, 6.2), layout="constrained")
    scores, agreement = fig.subplots(2, 1, sharex=True, height_ratios=(3, 2))
    _scores(scores, nights)
    _agreement(agreement, nights)
    for axis in (scores, agreement):
        for night in nights:
            if night.event in ("promoted", "rolled back"):
                axis.axvline(night.started, color=MARKS[night.event][1], alpha=0.35, linewidth=1)
        axis.grid(alpha=0.3)
    date_axis(agreement, times)
    agreement.set_xlabel("night (when it started)")
    span = f"{len(nights)} night" + ("s" if len(nights) != 1 else "")
    fig.suptitle(f"Nights over time: production, its candidates and the judge ({span})")
    return fig


def _scores(axis: Axes, nights: list[NightPoint]) -> None:
    """Production's and the candidates' held-out scores, each event marked (the figure's
    legend, below both panels, names them)."""
    times = [p.started for p in nights]
    production = [_nan(p.production_heldout) for p in nights]
    candidate = [_nan(p.candidate_heldout) for p in nights]
    axis.plot(times, production, color=BLUE, marker="o", label="production")
    axis.plot(
        times,
        candidate,
        color=ORANGE,
        marker="o",
        markerfacecolor="white",
        linestyle=":",
        label="the night's candidate",
    )
    handles, _ = axis.get_legend_handles_labels()
    for event, (marker, colour) in MARKS.items():
        marked = [p for p in nights if p.event == event]
        if not marked:
            continue
        # promoted or refused: the candidate's point; rolled back: production's
        ys = [
            _nan(p.production_heldout if event == "rolled back" else p.candidate_heldout)
            for p in marked
        ]
        axis.scatter(
            [p.started for p in marked],
            ys,
            marker=marker,
            s=110,
            color=colour,
            edgecolors="black",
            linewidths=0.6,
            zorder=3,
        )
        for p, y in zip(marked, ys, strict=True):
            if p.version is not None and y == y:
                axis.annotate(
                    f"v{p.version}",
                    (p.started, y),
                    xytext=(0, 9),
                    textcoords="offset points",
                    ha="center",
                    fontsize="small",
                )
        handles.append(
            Line2D(
                [],
                [],
                marker=marker,
                color=colour,
                markeredgecolor="black",
                linestyle="none",
                markersize=9,
                label=event,
            )
        )
    axis.set_ylabel("mean held-out score")
    axis.set_title("Held-out score of production and of each night's candidate")
    axis.margins(y=0.18)  # room for the versions above their marks
    axis.figure.legend(handles=handles, loc="outside lower center", ncols=len(handles))


def _agreement(axis: Axes, nights: list[NightPoint]) -> None:
    times = [p.started for p in nights]
    axis.plot(times, [_nan(p.judge_agreement) for p in nights], color=BLUE, marker="s")
    statistics = {p.judge_statistic for p in nights if p.judge_agreement is not None}
    name = statistics.pop().replace("_", " ") if len(statistics) == 1 else "agreement"
    axis.set_ylabel(f"held-out {name}")
    axis.set_title("The night's judge: agreement with people on held-out labels")


def _nan(value: float | None) -> float:
    """None as NaN: matplotlib leaves a gap in the line there."""
    return float("nan") if value is None else value
