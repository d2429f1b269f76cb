"""Watched agreement: the judge in use, measured night after night on the labels people
made after it, before those labels teach the next judge.

A judge version is trusted on the held-out labels of the night that made it. Traffic
moves (new intents, a new agent prompt, a new model), and a judge that agreed with people
then may not now. The labels made since its version are the only ones it has never been
chosen or calibrated on: its agreement there, against the figure it was registered
with, shows drift. A drop beyond `judge.max_agreement_drop` marks it untrusted (no agent
step runs on it, nothing is promoted on its word), and the traces where it disagreed with
those recent labels go first to people for a second label: either the judge is wrong
there, or the label is, and a second person settles which.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from datetime import datetime

from infra.lm import LM
from judges.align import fit_for
from judges.calls import Tally, tallied
from judges.judge import Judge
from judges.types import JudgedItem


@dataclass(frozen=True)
class Watch:
    judge: str  # the watched version, e.g. "agent-judge-rubric v3"
    primary: str  # the statistic, e.g. "kappa"
    since: datetime  # its newest label's time: the labels after it are new to it
    labels: int  # new labels it was measured on
    score: float  # its primary statistic on them
    made_with: float  # the same statistic on the held-out labels it was registered with
    max_drop: float
    min_labels: int
    disagreed: tuple[str, ...] = field(default=())  # traces where it and the new label differ

    @property
    def drop(self) -> float:
        return self.made_with - self.score

    @property
    def dropped(self) -> bool:
        """Enough new labels to tell, and agreement fell by more than the setting (an
        undefined statistic on them counts as a drop: `not <=` is true for NaN)."""
        enough = self.labels > 0 and self.labels >= self.min_labels
        return enough and not self.drop <= self.max_drop

    def line(self) -> str:
        if self.labels == 0:  # a weekend, a quiet day: the common case, not an error
            return (
                f"Judge watch: no labels made since {self.since:%Y-%m-%d %H:%M} UTC, the "
                f"newest {self.judge} learned from: nothing new to measure it on."
            )
        head = (
            f"Judge watch: {self.judge} on the {self.labels} labels made since "
            f"{self.since:%Y-%m-%d %H:%M} UTC: {self.primary} {self.score:.3f} against "
            f"{self.made_with:.3f} when it was registered"
        )
        if self.labels < self.min_labels:
            return f"{head}; too few to tell (judge.min_watch_labels = {self.min_labels})."
        if self.dropped:
            return (
                f"{head}, a drop of {self.drop:.3f} > judge.max_agreement_drop "
                f"{self.max_drop}: it is not trusted, and the {len(self.disagreed)} traces "
                "where it disagreed with the new labels go to people for a second label."
            )
        return f"{head}: within judge.max_agreement_drop {self.max_drop}."


async def watch_judge(
    lm: LM,
    judge: Judge,
    items: list[JudgedItem],
    labelled_at: dict[str, datetime],
    seed: int,
    max_drop: float,
    min_labels: int,
    tally: Tally | None = None,
) -> Watch | None:
    """`judge` (a registered version, with the time of the newest label it learned from
    and its recorded agreement) on the `items` labelled after that time; None when it records
    neither (a version registered before either was kept). `tally` counts judge calls."""
    made_with = judge.heldout.get(judge.primary)
    if judge.made_at is None or made_with is None:
        return None
    new = [item for item in items if labelled_at.get(item.id, judge.made_at) > judge.made_at]
    if not new:
        return Watch(
            judge.label, judge.primary, judge.made_at, 0, math.nan, made_with, max_drop, min_labels
        )
    fit = fit_for(judge.scale)
    report, _ = await fit.agreement(
        lm, judge.prompts, judge.threshold, new, seed, judge.adapter, judge.head, tally
    )
    score = report.get(judge.primary, float("nan"))
    watch = Watch(
        judge.label, judge.primary, judge.made_at, len(new), score, made_with, max_drop, min_labels
    )
    if watch.dropped:
        return replace(watch, disagreed=await _disagreed(lm, judge, new, tally))
    return watch


async def _disagreed(
    lm: LM, judge: Judge, items: list[JudgedItem], tally: Tally | None
) -> tuple[str, ...]:
    """The pass/fail items where the judge's verdict and the label differ (on other
    scales none are named: a near miss is not a disagreement to settle)."""
    metric = judge.metric(lm)
    scores = await tallied(items, metric.p_pass_many, tally)
    return tuple(
        item.id
        for item, score in zip(items, scores, strict=True)
        if score is not None
        and item.human_pass is not None
        and metric.passes(score) != item.human_pass
    )
