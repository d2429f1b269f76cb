"""The table of where the judge and people disagree."""

from datetime import UTC, datetime

from infra.scales import ScoreScale
from judges.disagreements import disagreements
from judges.feedback import NightVerdicts
from judges.judge import Judge
from judges.types import JudgedItem

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def labelled(trace_id: str, value, comment: str = "") -> JudgedItem:
    human_pass = value if isinstance(value, bool) else None
    return JudgedItem(trace_id, f"request {trace_id}", "reply", human_pass, comment, value)


def test_pass_fail_rows_are_the_disagreements_surest_first():
    judge = Judge({"rubric": "r"}, threshold=0.5)
    items = [
        labelled("agree", True),
        labelled("close", True, "fine by me"),  # judge says fail, barely
        labelled("sure", False, "wrong intent"),  # judge says pass, surely
        labelled("failed", True),  # its judging call failed: no score, no row
    ]
    verdicts = NightVerdicts({"agree": 0.9, "close": 0.45, "sure": 0.95}, {"agree"}, NOW)
    rows = disagreements(items, verdicts, judge, {"sure": "heldout", "close": "train"})
    assert [(r["trace"], r["people"], r["judge"], r["split"]) for r in rows] == [
        ("sure", "No", "Yes", "heldout"),
        ("close", "Yes", "No", "train"),
    ]
    assert rows[0]["comment"] == "wrong intent" and rows[0]["judge_score"] == 0.95


def test_on_a_numeric_scale_a_verdict_within_one_unit_agrees():
    stars = ScoreScale("numeric", minimum=1, maximum=5, name="stars")
    judge = Judge({"rubric": "r"}, stars)
    items = [labelled("near", 4.0), labelled("far", 1.0), labelled("unread", 2.0)]
    verdicts = NightVerdicts(
        {"near": 0.8, "far": 0.9, "unread": 0.0},
        set(),
        NOW,
        values={"near": 4.6, "far": 4.4},
        margins={"near": 0.5, "far": 0.2},
    )
    rows = disagreements(items, verdicts, judge, {})
    assert [(r["trace"], r["people"], r["judge"]) for r in rows] == [("far", "1", "4.4")]


def test_on_a_numeric_scale_the_surest_disagreements_come_first():
    stars = ScoreScale("numeric", minimum=1, maximum=5, name="stars")
    judge = Judge({"rubric": "r"}, stars)
    items = [labelled("unsure", 1.0), labelled("sure", 1.0)]
    verdicts = NightVerdicts(
        {"unsure": 0.9, "sure": 0.9},
        set(),
        NOW,
        values={"unsure": 4.0, "sure": 4.0},
        margins={"unsure": 0.1, "sure": 0.7},
    )
    rows = disagreements(items, verdicts, judge, {})
    assert [r["trace"] for r in rows] == ["sure", "unsure"]
