"""Where the judge and people disagree on the night's labelled traces: the table a person
reads to see what the judge gets wrong (and which labels may be wrong), most confident
disagreements first."""

from __future__ import annotations

from judges.feedback import NightVerdicts
from judges.judge import Judge
from judges.scaled_fit import show
from judges.types import JudgedItem

EXCERPT = 160  # characters of request, reply and comment shown per row


def disagreements(
    labelled: list[JudgedItem], verdicts: NightVerdicts, judge: Judge, splits: dict[str, str]
) -> list[dict[str, str | float]]:
    """One row per labelled trace the judge disagrees on: its split ("train", "val",
    "heldout": where the label served), both answers, the judge's score in [0, 1], and
    excerpts. Pass/fail: the verdict at the judge's threshold; another scale: its verdict
    on the scale, a number at least one unit from the person's."""
    rows = []
    for item in labelled:
        score = verdicts.scores.get(item.id)
        if score is None or item.human_value is None:  # unjudged (failed), or unlabelled
            continue
        if judge.scale.kind == "boolean":
            said, distance = score >= judge.threshold, abs(score - judge.threshold)
        elif item.id in verdicts.values:
            said = verdicts.values[item.id]
            distance = 1.0 - verdicts.margins.get(item.id, 0.0)
        else:
            continue  # the judge's verdict could not be read
        if _agree(said, item.human_value):
            continue
        rows.append(
            (
                distance,
                {
                    "trace": item.id,
                    "split": splits.get(item.id, "-"),
                    "people": show(_boolean(item.human_value, judge)),
                    "judge": show(said),
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


def _boolean(value: bool | str | float, judge: Judge) -> bool | str | float:
    return bool(value) if judge.scale.kind == "boolean" else value
