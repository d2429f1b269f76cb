"""What a night gives back to the trace source: label requests where the judge is least
sure (active learning) and the judge's verdict on every trace as a score, on the
annotation's scale (pass/fail, a category, or a number).

Both run after the night's versions are registered and neither may cost them: a
failure is caught by the flow, logged, and reported in one sentence.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from flows.collect import Collected
from flows.judge_in_use import JudgeInUse
from flows.runtime import Runtime
from flows.stages import judge_of
from infra.settings import JudgeSettings
from infra.traces import JudgeScore, LabelRequest
from judges.active_learning import least_certain, least_sure
from judges.parsing import Unparseable
from judges.scaled_align import show
from judges.scaled_metric import ScaledMetric

log = logging.getLogger(__name__)

DATA_TYPES = {"boolean": "BOOLEAN", "categorical": "CATEGORICAL", "numeric": "NUMERIC"}


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


@dataclass
class Feedback:
    judge: str  # the judge version that asked and scored
    unlabelled: int = 0
    labels_requested: int | None = None  # None: not done (see label_note)
    label_note: str = ""
    scores_total: int = 0
    scores_written: int | None = None
    score_note: str = ""

    def lines(self) -> list[str]:
        """One sentence each for the night's report."""
        if self.labels_requested is not None:
            labels = (
                f"Labels requested: {self.labels_requested} of {self.unlabelled} unlabelled "
                f"traces, where {self.judge} was least sure."
            )
        else:
            labels = f"Labels requested: none; {self.label_note}."
        if self.scores_written is not None:
            scores = (
                f"Scores written: {self.scores_written} of {self.scores_total} traces, "
                f"by {self.judge}."
            )
        else:
            scores = f"Scores written: none; {self.score_note}."
        return [labels, scores]

    def metrics(self) -> dict[str, float]:
        out = {}
        if self.labels_requested is not None:
            out["labels_requested"] = float(self.labels_requested)
        if self.scores_written is not None:
            out["scores_written"] = float(self.scores_written)
        return out


async def judge_night(rt: Runtime, collected: Collected, judge: JudgeInUse) -> NightVerdicts:
    items = collected.judged_items()
    metric = judge_of(rt, judge)
    scores, values, margins = {}, {}, {}
    if isinstance(metric, ScaledMetric):
        for item, (verdict, score) in zip(items, await metric.judged(items), strict=True):
            scores[item.id] = score
            margins[item.id] = metric.margin(verdict, score)
            if not isinstance(verdict, Unparseable):
                values[item.id] = verdict.value
    else:
        probs = await metric.p_pass_many(items)
        scores = {item.id: p for item, p in zip(items, probs, strict=True)}
    rationales = {}
    if rt.settings.judge.rationale_in_scores:
        texts = await asyncio.gather(*(metric.rationale(item) for item in items))
        rationales = {item.id: text for item, text in zip(items, texts, strict=True)}
    labelled = {item.id for item in collected.items}
    return NightVerdicts(scores, labelled, datetime.now(UTC), rationales, values, margins)


def label_requests(
    verdicts: NightVerdicts, judge: JudgeInUse, n: int, pending: set[str] = frozenset()
) -> list[LabelRequest]:
    """The n least sure traces that are neither labelled nor already waiting for a label
    (asked on an earlier night): pass/fail by P(pass) nearest the threshold, other
    scales by the judge's own margin."""
    skip = verdicts.labelled | pending
    if judge.scale.kind == "boolean":
        picked = least_certain(verdicts.scores, skip, judge.threshold, n)
        return [
            LabelRequest(
                trace_id=u.trace_id,
                reason=(
                    f"judge least sure: p_pass {u.p_pass:.3f} vs threshold {judge.threshold:.3f}"
                ),
                margin=u.margin,
                judge_version=judge.label,
            )
            for u in picked
        ]
    return [
        LabelRequest(
            trace_id=trace_id,
            reason=f"judge least sure: margin {margin:.3f}, verdict {_verdict(verdicts, trace_id)}",
            margin=margin,
            judge_version=judge.label,
        )
        for trace_id, margin in least_sure(verdicts.margins, skip, n)
    ]


def judge_scores(
    verdicts: NightVerdicts, judge: JudgeInUse, run_id: str, name: str
) -> list[JudgeScore]:
    """One score per judged trace, on the judge's scale; a trace whose verdict could not be
    read has no value on it, and gets none."""
    scores = []
    for trace_id, score in verdicts.scores.items():
        about = {"judge_version": judge.label, "judge_prompt_versions": judge.versions}
        if judge.scale.kind == "boolean":
            value = 1.0 if score >= judge.threshold else 0.0
            about |= {"threshold": judge.threshold, "p_pass": score}
        elif trace_id in verdicts.values:
            value = verdicts.values[trace_id]
            about |= {"threshold": judge.threshold, "score": score}
        else:
            continue
        scores.append(
            JudgeScore(
                id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"flywheel/{run_id}/{name}/{trace_id}")),
                trace_id=trace_id,
                name=name,
                value=value,
                timestamp=verdicts.judged_at,
                data_type=DATA_TYPES[judge.scale.kind],
                comment=verdicts.rationales.get(trace_id),
                metadata=about | {"judge_trusted": judge.trusted, "flywheel_run_id": run_id},
            )
        )
    return scores


def unlabelled_count(verdicts: NightVerdicts) -> int:
    return len(set(verdicts.scores) - verdicts.labelled)


def _verdict(verdicts: NightVerdicts, trace_id: str) -> str:
    value = verdicts.values.get(trace_id)
    return "unreadable" if value is None else show(value)


async def send_feedback(
    settings: JudgeSettings,
    judge: JudgeInUse,
    traces: int,
    judge_traces: Callable[[], Awaitable[NightVerdicts]],
    request_labels: Callable[[NightVerdicts], Awaitable[int]],
    write_scores: Callable[[NightVerdicts], Awaitable[int]],
) -> Feedback:
    """Judge the night's traces, then ask for labels and write scores; each step that
    fails is logged and said in the result, and never raises."""
    out = Feedback(judge=judge.label, scores_total=traces)
    try:
        verdicts = await judge_traces()
    except Exception as err:
        out.label_note = out.score_note = _failed("judging the night's traces", err)
        return out
    out.unlabelled = unlabelled_count(verdicts)
    if settings.active_learning_per_night == 0:
        out.label_note = "judge.active_learning_per_night is 0"
    elif out.unlabelled == 0:
        out.label_note = "every trace of the night already has a human label"
    else:
        try:
            out.labels_requested = await request_labels(verdicts)
        except Exception as err:
            out.label_note = _failed("label requests", err)
    if not settings.write_scores:
        out.score_note = "judge.write_scores is off"
    else:
        try:
            out.scores_written = await write_scores(verdicts)
        except Exception as err:
            out.score_note = _failed("judge scores", err)
    return out


def _failed(what: str, err: Exception) -> str:
    log.error("%s failed; the night's other results stay registered: %s", what, err)
    return f"{what} failed ({type(err).__name__}: {err})"
