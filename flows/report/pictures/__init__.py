"""The night's pictures: matplotlib Figures built from the night's data, one module per
picture, each answering one question a person asks of the night (its docstring says
which). Bare `Figure`s, never pyplot: no display on a server, no global state.

`night_pictures` gives each one that has something to draw, by file name; saving them
(`png`) and where they go (MLflow, Prefect, the report) is the caller's.
"""

from __future__ import annotations

from collections.abc import Sequence
from io import BytesIO

from matplotlib.figure import Figure

from flows.report.night_report import NightReport
from flows.report.pictures import gate, gepa, judge, timeline, trend
from flows.report.pictures.trend import NightPoint
from infra.settings import PromotionSettings

__all__ = ["NightPoint", "night_pictures", "png"]


def night_pictures(
    report: NightReport,
    history: Sequence[NightPoint],
    promotion: PromotionSettings | None = None,
    seed: int = 0,
) -> dict[str, Figure]:
    """File name -> picture, for each of the night's pictures that has data: the
    promotion gate (`gate.png`), the judge (`judge.png`), the GEPA searches
    (`gepa.png`), the nights so far (`trend.png`; `history`, oldest first or not, this
    night included when the caller has it) and where the time went (`time.png`).
    `promotion` and `seed`: the night's gate settings and seed, so the slices' intervals
    are the gate's (the defaults: `PromotionSettings()`, seed 0)."""
    pictures = {
        "gate.png": gate.figure(report.evidence, report.promotion, promotion, seed),
        "judge.png": judge.figure(report.gate.judge, history, report.run_id),
        "gepa.png": gepa.figure(report),
        "trend.png": trend.figure(history),
        "time.png": timeline.figure(report.stage_intervals, report.seconds),
    }
    return {name: picture for name, picture in pictures.items() if picture is not None}


def png(figure: Figure, dpi: int = 100) -> bytes:
    """A picture as PNG bytes (a bare Figure draws without a display)."""
    buffer = BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()
