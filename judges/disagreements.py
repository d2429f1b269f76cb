"""Where the judge and people disagree on the night's labelled traces: the table a person
reads to see what the judge gets wrong (and which labels may be wrong), most confident
disagreements first."""

from __future__ import annotations

from judges.feedback import NightVerdicts
from judges.judge import Judge
from judges.types import JudgedItem

EXCERPT = 160  # characters of request, reply and comment shown per row


def disagreements(
    labelled: list[JudgedItem], verdicts: NightVerdicts, judge: Judge, splits: dict[str, str]
) -> list[dict[str, str | float]]:
    """One row per labelled trace the judge disagrees on: its split ("train", "val",
    "heldout": where the label served), both answers, the judge's score in [0, 1], and
    excerpts. Pass/fail: the verdict at the judge's threshold; another scale: its verdict
    on the scale, a number at least one unit from the person's."""
    kind, rows = judge.kind, []
    for item in labelled:
        score = verdicts.scores.get(item.id)
        if score is None or item.human_value is None:  # unjudged (failed), or unlabelled
            continue
        said = kind.said(score, judge.threshold, verdicts.values.get(item.id))
        if said is None:
            continue  # the judge's verdict could not be read
        if _agree(said, item.human_value):
            continue
        rows.append(
            (
                kind.distance(score, judge.threshold, verdicts.margins.get(item.id, 0.0)),
                {
                    "trace": item.id,
                    "split": splits.get(item.id, "-"),
                    "people": kind.show(item.human_value),
                    "judge": kind.show(said),
                    "judge_score": round(score, 3),
                    "request": item.input_text[:EXCERPT],
                    "reply": item.output_text[:EXCERPT],
                    "comment": item.human_comment[:EXCERPT],
                },
            )
        )
    return [row for _, row in sorted(rows, key=lambda r: (-r[0], r[1]["trace"]))]


def _agree(said: bool | str | float, human: bool | str | float) -> bool:
    if isinstance(said, float) and isinstance(human, int | float) and not isinstance(human, bool):
        return abs(said - human) < 1.0
    return said == human
