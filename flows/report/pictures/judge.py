"""The night's judge, as a picture: where does it agree with people on the held-out
labels and where not, does its score mean what it says, and how has its agreement
moved from night to night?"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from flows.report.pictures.palette import BLACK, BLUE, GREY, ORANGE, VERMILLION, WIDTH
from flows.report.pictures.trend import NightPoint, date_axis
from judges.judge import Judge
from judges.kinds import kind_of
from judges.types import HeldoutVerdict

MAX_LEVELS = 12  # more distinct values than this: a scatter, not a matrix
BINS = 5  # of the judge's score, for the calibration curve


def levels(judge: Judge, verdicts: Sequence[HeldoutVerdict]) -> list | None:
    """The values the confusion matrix's rows and columns stand for, in the scale's order
    (pass before fail); None when there are too many to read as a matrix."""
    scale = judge.scale
    if kind_of(scale).pass_fail:
        return [True, False]
    if scale.categories:
        return list(scale.categories)
    values = sorted({v.human for v in verdicts} | {v.judged for v in verdicts})
    return values if len(values) <= MAX_LEVELS else None


def confusion(verdicts: Sequence[HeldoutVerdict], values: list) -> np.ndarray:
    """Counts: rows people's label, columns the judge's verdict, in `values`' order."""
    index = {value: i for i, value in enumerate(values)}
    counts = np.zeros((len(values), len(values)), dtype=int)
    for v in verdicts:
        counts[index[v.human], index[v.judged]] += 1
    return counts


def calibration(
    verdicts: Sequence[HeldoutVerdict], bins: int = BINS
) -> list[tuple[float, float, int]]:
    """Per non-empty bin of the judge's score (equal widths over [0, 1]): (the judge's
    mean score, people's mean score, items); for pass/fail people's mean score is the
    share they passed."""
    pairs = [(v.score, v.human_score) for v in verdicts if v.score is not None]
    pairs = [(s, h) for s, h in pairs if h is not None]
    out = []
    for k in range(bins):
        low, high = k / bins, (k + 1) / bins
        inside = [(s, h) for s, h in pairs if low <= s < high or (k == bins - 1 and s == 1.0)]
        if inside:
            scores, humans = zip(*inside, strict=True)
            out.append((float(np.mean(scores)), float(np.mean(humans)), len(inside)))
    return out


def figure(judge: Judge, history: Sequence[NightPoint] = (), tonight: str = "") -> Figure | None:
    """How well does the night's judge agree with people? Its verdicts against people's
    labels on the held-out split (a confusion matrix), its score against how often
    people passed (calibration, in bins of the score), and its held-out agreement night
    by night (`history`; `tonight`: this night's run id, marked). None: no held-out
    verdicts were kept (no held-out labels, or a night from before they were)."""
    verdicts = judge.heldout_verdicts
    if not verdicts:
        return None
    curve = calibration(verdicts)
    nights = [p for p in history if p.judge_agreement is not None]
    panels = 1 + bool(curve) + bool(nights)
    fig = Figure(figsize=(WIDTH, 4.4), layout="constrained")
    axes = fig.subplots(1, panels, squeeze=False)[0]
    _confusion_panel(axes[0], judge, verdicts)
    if curve:
        _calibration_panel(axes[1], judge, curve)
    if nights:
        _agreement_panel(axes[-1], nights, tonight)
    statistic = judge.primary.replace("_", " ")
    fig.suptitle(
        f"The night's judge against people: held-out {statistic} {judge.heldout_score:.2f} "
        f"on {len(verdicts)} labels ({judge.label})"
    )
    return fig


def _confusion_panel(axis: Axes, judge: Judge, verdicts: Sequence[HeldoutVerdict]) -> None:
    values = levels(judge, verdicts)
    kind = judge.kind
    if values is None:  # a continuous scale: each label against its verdict
        axis.scatter([v.human for v in verdicts], [v.judged for v in verdicts], color=BLUE)
        axis.set(xlabel="people's label", ylabel="the judge's verdict")
        axis.set_title("Judge's verdict against people's label")
        return
    counts = confusion(verdicts, values)
    names = [kind.show(v) if not kind.pass_fail else ("pass" if v else "fail") for v in values]
    axis.imshow(counts, cmap="Blues", vmin=0, vmax=max(int(counts.max()), 1))
    for (row, col), count in np.ndenumerate(counts):
        dark = count > 0.6 * counts.max()
        axis.text(
            col,
            row,
            str(count),
            ha="center",
            va="center",
            fontsize="large",
            color="white" if dark else BLACK,
            fontweight="bold" if row == col else "normal",
        )
    ticks = range(len(values))
    rotate = 30 if max(map(len, names)) > 6 and len(names) > 2 else 0
    axis.set_xticks(ticks, names, rotation=rotate, ha="right" if rotate else "center")
    axis.set_yticks(ticks, names)
    axis.set(xlabel="the judge said", ylabel="people said")
    axis.set_title("Held-out labels\n(diagonal: they agree)")


def _calibration_panel(axis: Axes, judge: Judge, curve: list[tuple[float, float, int]]) -> None:
    scores, humans, counts = zip(*curve, strict=True)
    axis.plot([0, 1], [0, 1], color=GREY, linestyle="--", linewidth=1, label="perfectly calibrated")
    axis.plot(scores, humans, color=BLUE, marker="o", label="the judge (mean per bin)")
    for s, h, n in curve:
        axis.annotate(
            f"n={n}",
            (s, h),
            xytext=(6, -4),
            textcoords="offset points",
            va="top",
            fontsize="small",
            color=BLUE,
        )
    if judge.kind.pass_fail:
        axis.axvline(
            judge.threshold,
            color=ORANGE,
            linestyle=":",
            linewidth=1.5,
            label=f"its pass cut ({judge.threshold:.2f})",
        )
        axis.set(xlabel="the judge's P(pass)", ylabel="share people passed")
    else:
        axis.set(
            xlabel="the judge's score (0 worst, 1 best)", ylabel="people's mean score (0 to 1)"
        )
    axis.set(xlim=(0, 1), ylim=(-0.1, 1.1))
    axis.set_title(f"Calibration\n({BINS} bins of the judge's score)")
    axis.grid(alpha=0.3)
    axis.legend(loc="upper left", fontsize="small")


def _agreement_panel(axis: Axes, nights: list[NightPoint], tonight: str) -> None:
    nights = sorted(nights, key=lambda p: p.started)
    times = [p.started for p in nights]
    values = [p.judge_agreement for p in nights]
    axis.plot(times, values, color=BLUE, marker="o")
    marked = [p for p in nights if p.run_id == tonight]
    if marked:
        axis.scatter(
            [p.started for p in marked],
            [p.judge_agreement for p in marked],
            s=140,
            facecolors="none",
            edgecolors=VERMILLION,
            linewidths=2,
            label="tonight",
            zorder=3,
        )
        axis.legend(loc="best", fontsize="small")
    statistics = {p.judge_statistic for p in nights}
    name = statistics.pop().replace("_", " ") if len(statistics) == 1 else "agreement"
    axis.set(ylabel=f"held-out {name}", xlabel="night")
    axis.set_title("Held-out agreement\nper night")
    date_axis(axis, times)
    axis.grid(alpha=0.3)
