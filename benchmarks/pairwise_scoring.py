"""How the MT-Bench benchmark reads a pairwise judge (rubric, and adapter if any).

Verdicts are cached per judge and item, read without a position lean, so a search's own
evaluations are not paid again; a judge's lean towards the first answer (no labels) and
its threshold on p_a are fitted on the training items, and it is scored by kappa on the
validation items (the choice between judges); held-out items are only reported, as
accuracy, kappa and position-flip rate (with the lean taken off, and without: the
model's raw flip) with bootstrap intervals.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass

from infra.lm import LM
from judges.calibration import calibrate_threshold
from judges.metrics import Estimate, accuracy, bootstrap, cohen_kappa, flip_rate
from judges.pairwise import PairwiseJudge, PairwiseVerdict, position_lean
from judges.types import PairwiseItem, Preference


@dataclass(frozen=True)
class Agreement:
    """Held-out agreement of one judge, with bootstrap intervals."""

    n: int
    accuracy: Estimate
    kappa: Estimate
    flip: Estimate
    flip_n: int  # items where both orders gave a verdict
    unparseable_calls: int
    calls: int
    raw_flip: Estimate | None = None  # a probability judge's, each order at 0.5 with no lean


@dataclass(frozen=True)
class Fit:
    """How one judge is read, fitted on train, and its kappa on val at that reading."""

    lean: float  # towards the answer shown first, in logits (`judges.pairwise.position_lean`)
    threshold: float
    val_kappa: float


def agreement(
    pred: Sequence[str],
    gold: Sequence[Preference],
    first: Sequence[Preference | None],
    second: Sequence[Preference | None],
    seed: int = 0,
) -> Agreement:
    """Accuracy and kappa of `pred` (labels, or "unparseable") against `gold`; flip rate of
    the per-order verdicts over the items where neither order is None."""
    both = [(a, b) for a, b in zip(first, second, strict=True) if a is not None and b is not None]
    flip = (
        bootstrap(flip_rate, [a for a, _ in both], [b for _, b in both], seed=seed)
        if both
        else Estimate(None, None, None)
    )
    return Agreement(
        n=len(gold),
        accuracy=bootstrap(accuracy, list(pred), list(gold), seed=seed),
        kappa=bootstrap(cohen_kappa, list(pred), list(gold), seed=seed),
        flip=flip,
        flip_n=len(both),
        unparseable_calls=sum(v is None for v in (*first, *second)),
        calls=2 * len(gold),
    )


def heldout_agreement(
    verdicts: list[PairwiseVerdict], fit: Fit, heldout: list[PairwiseItem]
) -> Agreement:
    """A probability judge's held-out agreement: its verdicts (read without a lean) re-read
    with the fitted lean and cut at the threshold; each order read on its own at 0.5 for
    the flip rate, with the lean and without."""
    leaned = [v.leaned(fit.lean, fit.threshold) for v in verdicts]
    gold = [i.human_prefers for i in heldout]
    result = agreement([v.prefers for v in leaned], gold, *_orders(leaned))
    return dataclasses.replace(result, raw_flip=bootstrap(flip_rate, *_orders(verdicts)))


def _orders(verdicts: list[PairwiseVerdict]) -> tuple[list[Preference], list[Preference]]:
    first: list[Preference] = ["A" if v.p_a_by_order[0] >= 0.5 else "B" for v in verdicts]
    second: list[Preference] = ["A" if v.p_a_by_order[1] >= 0.5 else "B" for v in verdicts]
    return first, second


def _length(item: PairwiseItem) -> int:
    return len(item.question) + len(item.answer_a) + len(item.answer_b)


class VerdictCache:
    """p_a verdicts per (judge prompts, adapter, item id): GEPA's own evaluations are kept,
    so the threshold fit and the val choice do not pay again for what the search read."""

    def __init__(self) -> None:
        self.verdicts: dict[tuple[str, str | None, str], PairwiseVerdict] = {}

    @staticmethod
    def key(
        prompts: dict[str, str], item: PairwiseItem, adapter: str | None = None
    ) -> tuple[str, str | None, str]:
        return json.dumps(prompts, sort_keys=True), adapter, item.id

    async def judge(
        self,
        lm: LM,
        prompts: dict[str, str],
        items: list[PairwiseItem],
        chunk: int,
        adapter: str | None = None,
    ) -> list[PairwiseVerdict]:
        """Verdicts for `items`, new ones in chunks of similar length: one batched forward of
        many long prompts padded to the longest is several times slower on CPU."""
        judge = PairwiseJudge(lm, prompts, adapter=adapter)
        new = {i.id: i for i in items if self.key(prompts, i, adapter) not in self.verdicts}
        todo = sorted(new.values(), key=_length)
        for start in range(0, len(todo), chunk):
            batch = todo[start : start + chunk]
            for item, verdict in zip(batch, await judge.verdicts(batch), strict=True):
                self.verdicts[self.key(prompts, item, adapter)] = verdict
        return [self.verdicts[self.key(prompts, item, adapter)] for item in items]

    async def fit(
        self,
        lm: LM,
        prompts: dict[str, str],
        train: list[PairwiseItem],
        val: list[PairwiseItem],
        chunk: int,
        adapter: str | None = None,
    ) -> Fit:
        """The lean and threshold fitted on train; kappa on val with both."""
        verdicts = await self.judge(lm, prompts, train + val, chunk, adapter)
        return fit_verdicts(verdicts[: len(train)], verdicts[len(train) :], train, val)


def fit_verdicts(
    train_verdicts: list[PairwiseVerdict],
    val_verdicts: list[PairwiseVerdict],
    train: list[PairwiseItem],
    val: list[PairwiseItem],
) -> Fit:
    """The lean and threshold fitted on train, in that order; kappa on val with both."""
    lean = position_lean(train_verdicts)
    p_train = [v.leaned(lean, 0.5).p_a for v in train_verdicts]
    threshold = calibrate_threshold(p_train, [i.human_prefers == "A" for i in train])
    pred = [v.leaned(lean, threshold).prefers for v in val_verdicts]
    return Fit(lean, threshold, cohen_kappa(pred, [i.human_prefers for i in val]))
