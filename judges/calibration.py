"""Choosing the pass threshold on a judge's probabilities from human labels.

A small model's "yes" probability is informative but badly centred (it may say "no"
to almost everything), so the threshold is fitted to the training annotations, never
to held-out ones. Balanced accuracy keeps a skewed label mix from pushing the threshold
to "always the majority class".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable, Sequence


def balanced_accuracy(pred: Sequence[bool], gold: Sequence[bool]) -> float:
    pos = [p for p, g in zip(pred, gold, strict=True) if g]
    neg = [not p for p, g in zip(pred, gold, strict=True) if not g]
    rates = [sum(group) / len(group) for group in (pos, neg) if group]
    return sum(rates) / len(rates)


def calibrate_threshold(probs: Sequence[float], gold: Sequence[bool]) -> float:
    """The threshold (midpoint between neighbouring probabilities) with the best
    balanced accuracy; ties go to the threshold nearest 0.5."""
    if not probs:
        return 0.5
    values = sorted(set(probs))
    cuts = [values[0] - 1e-6] + [(a + b) / 2 for a, b in zip(values, values[1:], strict=False)]
    cuts.append(values[-1] + 1e-6)

    def quality(cut: float) -> tuple[float, float]:
        score = balanced_accuracy([p >= cut for p in probs], gold)
        return score, -abs(cut - 0.5)

    return max(cuts, key=quality)


def balancing_weights(labels: Iterable[Hashable | None], everyone: Iterable[Hashable]) -> dict:
    """Weights in (0, 1] that give each label the same total weight (None = unlabelled),
    so a judge that always gives the majority answer cannot win; 1.0 each for the labels
    in `everyone` when fewer than two labels occur."""
    counts = Counter(label for label in labels if label is not None)
    if len(counts) < 2:
        return dict.fromkeys(everyone, 1.0)
    rarest = min(counts.values())
    return {label: rarest / count for label, count in counts.items()}
