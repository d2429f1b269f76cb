"""Splits by trace, stratified by the human label, fixed by seed.

The held-out part is only ever used to report agreement, never to select a judge.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from judges.types import JudgedItem


def stratified_split(
    items: Sequence[JudgedItem], fraction: float, seed: int
) -> tuple[list[JudgedItem], list[JudgedItem]]:
    """(rest, part) where `part` holds about `fraction` of each label's traces."""
    if not 0 < fraction < 1:
        raise ValueError(f"split fraction must be between 0 and 1, got {fraction}")
    by_trace: dict[str, JudgedItem] = {}
    for item in items:
        by_trace.setdefault(item.id, item)  # one trace never lands on both sides
    rng = random.Random(seed)
    rest: list[JudgedItem] = []
    part: list[JudgedItem] = []
    for label in (True, False, None):
        group = sorted((i for i in by_trace.values() if i.human_pass is label), key=lambda i: i.id)
        rng.shuffle(group)
        cut = round(len(group) * fraction)
        part += group[:cut]
        rest += group[cut:]
    return rest, part
