"""What the judge gives back to the trace source each night: its verdict on every trace
as a score on the annotation's scale, and label requests where it is least sure (active
learning: pass/fail by P(pass) nearest its threshold, other scales by its own margin)."""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime

from infra.lm import LM
from infra.traces import JudgeScore, LabelRequest
from judges.active_learning import least_sure
from judges.calls import Done, answered, counted, each
from judges.judge import Judge
from judges.parsing import Unparseable
from judges.scaled_metric import ScaledMetric
from judges.types import JudgedItem
from judges.watch import Watch


@dataclass
class NightVerdicts:
    """The judge in use on each of the night's traces (plain data: Prefect persists it)."""

    scores: dict[str, float]  # trace id -> the judge's score in [0, 1]: P(pass) for pass/fail
    labelled: set[str]  # traces with a human label the judge learns from
    judged_at: datetime  # the scores' timestamp: a resend then updates, never duplicates
    rationales: dict[str, str] = field(default_factory=dict)
    # Other scales than pass/fail: the verdict on the scale (none where it was unreadable)
    # and how sure it was (`ScaledMetric.margin`).
    values: dict[str, bool | str | float] = field(default_factory=dict)
    margins: dict[str, float] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)  # traces whose judging call failed: no score
    # Rows of `judges.disagreements`: the labelled traces where the judge and people differ
    disagreements: list[dict[str, str | float]] = field(default_factory=list)

    @property
    def unlabelled(self) -> int:
        return len(set(self.scores) - self.labelled)


async def judge_traces(
    lm: LM,
    judge: Judge,
    items: list[JudgedItem],
    labelled: set[str],
    rationale_max_tokens: int = 48,
    with_rationales: bool = False,
    done: Done | None = None,
) -> NightVerdicts:
    """The judge on every trace in `items`; `labelled` are those a human annotated.
    `done(1)` as each judge call ends: each verdict, then each rationale."""
    metric = judge.metric(lm, rationale_max_tokens)
    scores, values, margins = {}, {}, {}
    if isinstance(metric, ScaledMetric):
        judged, verdicts = answered(items, await counted(items, metric.judged, done))
        for item, (verdict, score) in zip(judged, verdicts, strict=True):
            scores[item.id] = score
            margins[item.id] = metric.margin(verdict, score)
            if not isinstance(verdict, Unparseable):
                values[item.id] = verdict.value
    else:
        judged, probs = answered(items, await counted(items, metric.p_pass_many, done))
        scores = {item.id: p for item, p in zip(judged, probs, strict=True)}
    rationales = {}
    if with_rationales:
        explained, texts = answered(judged, await each(judged, metric.rationale, done))
        rationales = {item.id: text for item, text in zip(explained, texts, strict=True)}
    failed = [item.id for item in items if item.id not in scores]
    return NightVerdicts(
        scores, set(labelled), datetime.now(UTC), rationales, values, margins, failed
    )


def second_opinions(watch: Watch, pending: set[str], n: int) -> list[LabelRequest]:
    """Up to n traces where the drifted judge in use and a recent label disagree, for a
    second person's label: either the judge is wrong there or the label is."""
    return [
        LabelRequest(
            trace_id=trace_id,
            reason=f"second label: {watch.judge} and a recent label disagree here",
            margin=0.0,
            judge_version=watch.judge,
        )
        for trace_id in [t for t in watch.disagreed if t not in pending][:n]
    ]


def label_requests(
    verdicts: NightVerdicts, judge: Judge, n: int, pending: set[str] = frozenset()
) -> list[LabelRequest]:
    """The n least sure traces that are neither labelled nor already waiting for a label
    (asked on an earlier night)."""
    kind, skip = judge.kind, verdicts.labelled | pending
    margins = kind.label_margins(verdicts.scores, verdicts.margins, judge.threshold)

    def reason(trace_id: str, margin: float) -> str:
        score, value = verdicts.scores.get(trace_id, math.nan), verdicts.values.get(trace_id)
        return f"judge least sure: {kind.unsure(score, margin, judge.threshold, value)}"

    return [
        LabelRequest(
            trace_id=trace_id,
            reason=reason(trace_id, margin),
            margin=margin,
            judge_version=judge.label,
        )
        for trace_id, margin in least_sure(margins, skip, n)
    ]


def judge_scores(
    verdicts: NightVerdicts, judge: Judge, trusted: bool, run_id: str, name: str
) -> list[JudgeScore]:
    """One score per judged trace, on the judge's scale; a trace whose verdict could not be
    read has no value on it, and gets none."""
    kind, scores = judge.kind, []
    for trace_id, score in verdicts.scores.items():
        said = kind.said(score, judge.threshold, verdicts.values.get(trace_id))
        if said is None:  # unreadable: no value on the scale
            continue
        about = {
            "judge_version": judge.label,
            "judge_prompt_versions": judge.versions,
            "threshold": judge.threshold,
            kind.score_name: score,
        }
        scores.append(
            JudgeScore(
                id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"flywheel/{run_id}/{name}/{trace_id}")),
                trace_id=trace_id,
                name=name,
                value=kind.stored(said),
                timestamp=verdicts.judged_at,
                kind=judge.scale.kind,
                comment=verdicts.rationales.get(trace_id),
                metadata=about | {"judge_trusted": trusted, "flywheel_run_id": run_id},
            )
        )
    return scores
