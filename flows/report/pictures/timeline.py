"""Where the night's time went, as a picture: which stages took the night's hours, in
what order, and how much of the night lay between them?"""

from __future__ import annotations

from matplotlib.figure import Figure

from flows.report.pictures.palette import BLUE, WIDTH


def unit(seconds: float) -> tuple[str, float]:
    """The unit a span of `seconds` reads best in: (name, seconds per unit)."""
    if seconds < 120:
        return "s", 1.0
    if seconds < 2 * 3600:
        return "min", 60.0
    return "h", 3600.0


def duration(seconds: float) -> str:
    """ "42 s", "12.5 min", "3.2 h"."""
    name, size = unit(seconds)
    return f"{seconds:.0f} s" if name == "s" else f"{seconds / size:.1f} {name}"


def figure(intervals: dict[str, tuple[float, float]], wall_seconds: float = 0.0) -> Figure | None:
    """Where did the night's time go? One bar per stage from its start to its end, the
    night's first stage starting at zero, each labelled with its time and its share of
    the night's wall time (`wall_seconds`; at least first start to last end). None: no
    stage was timed."""
    if not intervals:
        return None
    stages = sorted(intervals.items(), key=lambda item: item[1])
    origin = stages[0][1][0]
    spanned = max(end for _, (_, end) in stages) - origin
    total = max(wall_seconds, spanned)  # a night's wall time holds its stages
    name, size = unit(total)
    fig = Figure(figsize=(WIDTH, 1.6 + 0.38 * len(stages)), layout="constrained")
    axis = fig.subplots()
    rows = list(range(len(stages)))[::-1]  # the first stage on top
    for row, (_, (begin, end)) in zip(rows, stages, strict=True):
        left, width = (begin - origin) / size, (end - begin) / size
        axis.barh(row, width, left=left, height=0.6, color=BLUE)
        share = f" ({(end - begin) / total:.0%})" if total > 0 else ""
        axis.annotate(
            f"{duration(end - begin)}{share}",
            (left + width, row),
            xytext=(5, 0),
            textcoords="offset points",
            va="center",
            fontsize="small",
        )
    axis.set_yticks(rows, [stage for stage, _ in stages])
    axis.set_xlim(0, max(total / size * 1.15, 1.0))
    axis.set_xlabel(f"time since the night's first stage started ({name})")
    axis.grid(axis="x", alpha=0.3)
    axis.set_title(
        f"Where the night's time went: {duration(total)} wall time, {len(stages)} timed stages"
    )
    return fig
