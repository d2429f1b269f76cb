"""Splits by trace, stratified by the human label, fixed by seed.

The held-out part is only ever used to report agreement, never to select a judge. The
label is the pass/fail verdict, else the value on the annotation's scale; a numeric
scale with many distinct values is stratified by rank into MAX_STRATA bins, since a
stratum of one trace would always land on the same side.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Hashable, Sequence

from judges.types import JudgedItem

MAX_STRATA = 10


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
    for group in _strata(list(by_trace.values())):
        group.sort(key=lambda i: i.id)
        rng.shuffle(group)
        cut = round(len(group) * fraction)
        part += group[:cut]
        rest += group[cut:]
    return rest, part


def judge_splits(
    items: Sequence[JudgedItem], heldout_fraction: float, seed: int
) -> tuple[list[JudgedItem], list[JudgedItem], list[JudgedItem]]:
    """(train, val, held-out), fixed by seed: the gate re-measures the judge in use on the
    very held-out items the new judge was measured on."""
    selection, heldout = stratified_split(items, heldout_fraction, seed)
    train, val = stratified_split(selection, 0.4, seed + 1)
    return train, val, heldout


def _label(item: JudgedItem) -> Hashable:
    return item.human_pass if item.human_pass is not None else item.human_value


def _strata(items: list[JudgedItem]) -> list[list[JudgedItem]]:
    """Items grouped by label in a fixed order: pass, fail, unlabelled, then the others."""
    groups: dict[Hashable, list[JudgedItem]] = defaultdict(list)
    for item in items:
        groups[_label(item)].append(item)
    numbers = [k for k in groups if isinstance(k, int | float) and not isinstance(k, bool)]
    if len(numbers) > MAX_STRATA:  # rank bins over the numeric labels
        ranked = sorted(
            (i for k in numbers for i in groups.pop(k)), key=lambda i: (_label(i), i.id)
        )
        for rank, item in enumerate(ranked):
            groups[("bin", rank * MAX_STRATA // len(ranked))].append(item)
    first = [k for k in (True, False, None) if k in groups]
    others = sorted((k for k in groups if k not in first), key=repr)
    return [groups[k] for k in first + others]
