"""What a night gives back to the trace source: label requests where the judge is least
sure (active learning) and the judge's verdict on every trace as a score.

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
from judges.active_learning import least_certain

log = logging.getLogger(__name__)


@dataclass
class NightVerdicts:
    """The judge in use on each of the night's traces."""

    p_pass: dict[str, float]  # trace id -> probability of a pass
    labelled: set[str]  # traces with a human label the judge learns from
    judged_at: datetime  # the scores' timestamp: a resend then updates, never duplicates
    rationales: dict[str, str] = field(default_factory=dict)


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
    pointwise = judge_of(rt, judge)
    probs = await pointwise.p_pass_many(items)
    rationales = {}
    if rt.settings.judge.rationale_in_scores:
        texts = await asyncio.gather(*(pointwise.rationale(item) for item in items))
        rationales = {item.id: text for item, text in zip(items, texts, strict=True)}
    return NightVerdicts(
        p_pass={item.id: p for item, p in zip(items, probs, strict=True)},
        labelled={item.id for item in collected.items},
        judged_at=datetime.now(UTC),
        rationales=rationales,
    )


def label_requests(
    verdicts: NightVerdicts, judge: JudgeInUse, n: int, pending: set[str] = frozenset()
) -> list[LabelRequest]:
    """The n least sure traces that are neither labelled nor already waiting for a label
    (asked on an earlier night)."""
    picked = least_certain(verdicts.p_pass, verdicts.labelled | pending, judge.threshold, n)
    return [
        LabelRequest(
            trace_id=u.trace_id,
            reason=(f"judge least sure: p_pass {u.p_pass:.3f} vs threshold {judge.threshold:.3f}"),
            margin=u.margin,
            judge_version=judge.label,
        )
        for u in picked
    ]


def judge_scores(
    verdicts: NightVerdicts, judge: JudgeInUse, run_id: str, name: str
) -> list[JudgeScore]:
    return [
        JudgeScore(
            id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"flywheel/{run_id}/{name}/{trace_id}")),
            trace_id=trace_id,
            name=name,
            value=1.0 if p >= judge.threshold else 0.0,
            timestamp=verdicts.judged_at,
            comment=verdicts.rationales.get(trace_id),
            metadata={
                "judge_version": judge.label,
                "judge_prompt_versions": judge.versions,
                "threshold": judge.threshold,
                "p_pass": p,
                "judge_trusted": judge.trusted,
                "flywheel_run_id": run_id,
            },
        )
        for trace_id, p in verdicts.p_pass.items()
    ]


def unlabelled_count(verdicts: NightVerdicts) -> int:
    return len(set(verdicts.p_pass) - verdicts.labelled)


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
