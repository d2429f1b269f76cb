"""Which traces a human should label next: those the judge is least sure about.

For a probability judge the least sure verdicts are the ones nearest its calibrated
threshold: a label there moves the threshold and the rubric most, while a label on a
verdict far from it mostly confirms what the judge already gets right.
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
    """The `n` unlabelled traces with the smallest margin, least sure first (ties by id, so
    a night replays); a trace in `labelled` is never picked."""
    if n < 0:
        raise ValueError(f"the number of traces to pick must be >= 0, got {n}")
    for trace_id, p in p_pass.items():
        if not (isinstance(p, int | float) and math.isfinite(p) and 0.0 <= p <= 1.0):
            raise ValueError(f"trace {trace_id}: p_pass must be a probability, got {p!r}")
    labelled = set(labelled)
    candidates = [
        Uncertain(trace_id, p, abs(p - threshold))
        for trace_id, p in p_pass.items()
        if trace_id not in labelled
    ]
    candidates.sort(key=lambda u: (u.margin, u.trace_id))
    return candidates[:n]
