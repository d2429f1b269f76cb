"""The shipped MT-Bench human preferences as pairwise judge items, and their splits.

Here, not in `judges/`: the judge must not know which benchmark it is measured on.
Several items share a question, so splits are made by question: a judge prompt tuned
on one pair of answers to a question would otherwise be scored on another pair of the
same question.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from judges.types import PairwiseItem

DATA = Path(__file__).parent / "data" / "llmbar_mtbench" / "dataset.json"
_LABELS = {1: "A", 2: "B"}


def _text(record: dict, index: int, field: str) -> str:
    value = record.get(field)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"record {index}: field {field!r} must be a non-empty string")
    return value


def _item(record: object, index: int) -> PairwiseItem:
    if not isinstance(record, dict):
        raise ValueError(f"record {index}: must be an object, got {type(record).__name__}")
    question = _text(record, index, "input")
    label = record.get("label")
    if isinstance(label, bool) or label not in _LABELS:  # True == 1 in Python
        raise ValueError(f"record {index}: field 'label' must be 1 or 2, got {label!r}")
    return PairwiseItem(
        id=f"mtbench-{index:03d}",
        group="q-" + hashlib.sha256(question.encode("utf-8")).hexdigest()[:12],
        question=question,
        answer_a=_text(record, index, "output_1"),
        answer_b=_text(record, index, "output_2"),
        human_prefers=_LABELS[label],
    )


def load(path: Path | str = DATA) -> list[PairwiseItem]:
    """LLMBar's `[{"input", "output_1", "output_2", "label": 1 | 2}]` as items."""
    records = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(records, list):
        raise ValueError(f"{path}: expected a JSON list of records")
    return [_item(record, index) for index, record in enumerate(records)]


def split_by_question(
    items: Sequence[PairwiseItem],
    heldout_fraction: float,
    seed: int,
    val_fraction: float | None = None,
) -> tuple[list[PairwiseItem], list[PairwiseItem], list[PairwiseItem]]:
    """(train, val, heldout), whole questions on one side each, fixed by seed.

    Questions are placed largest first (random among equal sizes), each into the part
    whose per-label item counts are furthest below their share, so each part's label mix
    follows the whole as closely as whole questions allow. Fractions are of items, not
    questions; `val_fraction` defaults to `heldout_fraction`.
    """
    val_fraction = heldout_fraction if val_fraction is None else val_fraction
    if not (0 < heldout_fraction and 0 <= val_fraction and heldout_fraction + val_fraction < 1):
        raise ValueError(
            f"need 0 < heldout_fraction, 0 <= val_fraction and their sum < 1; "
            f"got {heldout_fraction} and {val_fraction}"
        )
    groups: dict[str, list[PairwiseItem]] = {}
    for item in items:
        groups.setdefault(item.group, []).append(item)
    order = sorted(groups)
    random.Random(seed).shuffle(order)
    order.sort(key=lambda g: -len(groups[g]))  # stable: the shuffle breaks ties

    totals = Counter(item.human_prefers for item in items)
    shares = (1 - heldout_fraction - val_fraction, val_fraction, heldout_fraction)
    parts: tuple[list[PairwiseItem], ...] = ([], [], [])
    counts = [Counter() for _ in parts]

    def need(part: int, labels: Counter) -> float:
        return sum(n * (shares[part] * totals[k] - counts[part][k]) for k, n in labels.items())

    open_parts = [part for part in range(len(parts)) if shares[part] > 0]
    for group in order:
        labels = Counter(item.human_prefers for item in groups[group])
        best = max(open_parts, key=lambda part: need(part, labels))
        parts[best].extend(groups[group])
        counts[best].update(labels)
    position = {id(item): index for index, item in enumerate(items)}
    train, val, heldout = (sorted(part, key=lambda i: position[id(i)]) for part in parts)
    return train, val, heldout
