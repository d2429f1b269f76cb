"""Sending back to the trace source what the judge makes of the night's traces
(`judges.feedback`): label requests where it is least sure, and its verdicts as scores.

Both run after the night's versions are registered and neither may cost them: a
failure is caught here, logged, and reported in one sentence.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from infra.settings import JudgeSettings
from judges.feedback import NightVerdicts

log = logging.getLogger(__name__)


@dataclass
class Feedback:
    judge: str  # the judge version that asked and scored
    unlabelled: int = 0
    labels_requested: int | None = None  # None: not done (see label_note)
    label_note: str = ""
    scores_total: int = 0
    scores_written: int | None = None
    score_note: str = ""
    # the labelled traces where the judge and people differ (`judges.disagreements`)
    disagreements: list[dict[str, str | float]] = field(default_factory=list)

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


def labels_wanted(settings: JudgeSettings, trusted: bool) -> int:
    """Label requests tonight: more when the judge is not trusted, since labels are what
    it lacks (`judge.untrusted_label_requests`)."""
    if trusted:
        return settings.active_learning_per_night
    return max(settings.active_learning_per_night, settings.untrusted_label_requests)


async def send_feedback(
    settings: JudgeSettings,
    judge_label: str,
    traces: int,
    wanted: int,
    judge_traces: Callable[[], Awaitable[NightVerdicts]],
    request_labels: Callable[[NightVerdicts], Awaitable[int]],
    write_scores: Callable[[NightVerdicts], Awaitable[int]],
) -> Feedback:
    """Judge the night's traces, then ask for labels and write scores; each step that
    fails is logged and said in the result, and never raises."""
    out = Feedback(judge=judge_label, scores_total=traces)
    if traces == 0:  # a quiet day: "every trace already has a label" would be untrue
        out.label_note = out.score_note = "no traces in the night's window to judge"
        return out
    try:
        verdicts = await judge_traces()
    except Exception as err:
        out.label_note = out.score_note = _failed("judging the night's traces", err)
        return out
    out.unlabelled = verdicts.unlabelled
    out.disagreements = verdicts.disagreements
    if wanted == 0:
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
