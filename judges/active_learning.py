"""Which traces a human should label next: those the judge is least sure about.

For a probability judge the least sure verdicts are the ones nearest its calibrated
threshold: a label there moves the threshold and the rubric most, while a label on a
verdict far from it mostly confirms what the judge already gets right. A judge on
another scale says how sure it is with a margin of its own (`ScaledVerdict.margin`).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Uncertain:
    trace_id: str
    p_pass: float
    margin: float  # |p_pass - threshold|: the smaller, the less sure


def least_certain(
    p_pass: Mapping[str, float], labelled: Collection[str], threshold: float, n: int
) -> list[Uncertain]:
    """The `n` unlabelled traces whose probability is nearest `threshold`, least sure
    first; a trace in `labelled` is never picked."""
    margins = threshold_margins(p_pass, threshold)
    return [Uncertain(t, p_pass[t], margin) for t, margin in least_sure(margins, labelled, n)]


def threshold_margins(p_pass: Mapping[str, float], threshold: float) -> dict[str, float]:
    """Per trace |p_pass - threshold|: how sure a probability judge is of its verdict."""
    for trace_id, p in p_pass.items():
        if not (isinstance(p, int | float) and math.isfinite(p) and 0.0 <= p <= 1.0):
            raise ValueError(f"trace {trace_id}: p_pass must be a probability, got {p!r}")
    return {trace_id: abs(p - threshold) for trace_id, p in p_pass.items()}


def least_sure(
    margins: Mapping[str, float], labelled: Collection[str], n: int
) -> list[tuple[str, float]]:
    """(trace id, margin) of the `n` unlabelled traces with the smallest margin, least
    sure first (ties by id, so a night replays); a trace in `labelled` is never picked."""
    if n < 0:
        raise ValueError(f"the number of traces to pick must be >= 0, got {n}")
    for trace_id, margin in margins.items():
        if not (isinstance(margin, int | float) and math.isfinite(margin) and margin >= 0):
            raise ValueError(f"trace {trace_id}: a margin is a number >= 0, got {margin!r}")
    labelled = set(labelled)
    candidates = sorted(
        (margin, trace_id) for trace_id, margin in margins.items() if trace_id not in labelled
    )
    return [(trace_id, margin) for margin, trace_id in candidates[:n]]
