import pytest

from infra.scales import ScoreScale
from judges.parsing import ParsedVerdict, ParseTally, Unparseable, parse_verdict

BOOLEAN = ScoreScale("boolean")
CATEGORIES = ScoreScale("categorical", ("correct", "partially correct", "incorrect"))
SCORE = ScoreScale("numeric", minimum=1, maximum=10)


@pytest.mark.parametrize(
    ("text", "scale", "expected"),
    [
        # JSON, fenced, with chatter after the fence
        (
            'Sure.\n```json\n{"verdict": "pass", "rationale": "it answers"}\n```\nAnything else?',
            BOOLEAN,
            ParsedVerdict(True, "it answers"),
        ),
        # unclosed fence around complete JSON: the object is whole, so it counts
        (
            '```json\n{"Verdict": false, "Reason": "wrong city"}',
            BOOLEAN,
            ParsedVerdict(False, "wrong city"),
        ),
        (
            '{"label": "INCORRECT", "explanation": "x"} trailing',
            CATEGORIES,
            ParsedVerdict("incorrect", "x"),
        ),
        ('{"score": "7 out of 10", "reasoning": "r"}', SCORE, ParsedVerdict(7.0, "r")),
        ('{"score": 8}', SCORE, ParsedVerdict(8.0, "")),
        # key lines, markdown bold included; the rationale runs to the next key line
        ("Verdict: PASS\nRationale: fine\nmore\n", BOOLEAN, ParsedVerdict(True, "fine\nmore")),
        ("**Rationale:** vague\n**Verdict:** fail", BOOLEAN, ParsedVerdict(False, "vague")),
        ("Score: 7/10\nRationale: solid", SCORE, ParsedVerdict(7.0, "solid")),
        (
            "Label: partially correct\nIt misses one step.",
            CATEGORIES,
            ParsedVerdict("partially correct", "It misses one step."),
        ),
        # bare answers
        ("No, the reply is wrong.", BOOLEAN, ParsedVerdict(False, "the reply is wrong.")),
        ("yes", BOOLEAN, ParsedVerdict(True, "")),
        ("8. Good but terse.", SCORE, ParsedVerdict(8.0, "Good but terse.")),
        # "correct" inside "partially correct" is not a second category
        (
            "Partially correct: misses X.",
            CATEGORIES,
            ParsedVerdict("partially correct", "Partially correct: misses X."),
        ),
    ],
)
def test_parses(text, scale, expected):
    assert parse_verdict(text, scale) == expected


@pytest.mark.parametrize(
    ("text", "scale", "reason"),
    [
        ("", BOOLEAN, "empty output"),
        ("  \n", SCORE, "empty output"),
        (
            '```json\n{"verdict": "pass", "rationale": "cut o',
            BOOLEAN,
            "broken JSON: Unterminated string starting at (char 33)",
        ),
        (
            '{"verdict": "pass" "rationale": "ok"}',
            BOOLEAN,
            "broken JSON: Expecting ',' delimiter (char 19)",
        ),
        (
            '{"rationale": "fine"}',
            BOOLEAN,
            "no verdict: the JSON has none of the keys "
            "verdict, label, score, rating, decision, grade",
        ),
        (
            "Verdict: correct, or maybe incorrect",
            CATEGORIES,
            "ambiguous: 'correct, or maybe incorrect' names correct, incorrect",
        ),
        (
            "Correct, well, incorrect.",
            CATEGORIES,
            "ambiguous: 'Correct, well, incorrect.' names correct, incorrect",
        ),
        ("Verdict: pass\nVerdict: fail", BOOLEAN, "conflicting verdicts: 'fail', 'pass'"),
        ("Verdict: pass or fail", BOOLEAN, "ambiguous: 'pass or fail' says both pass and fail"),
        ("Score: 12", SCORE, "out of range: 12 is outside [1, 10]"),
        ('{"score": 0}', SCORE, "out of range: 0 is outside [1, 10]"),
        ("Score: 3/5", SCORE, "out of range: 3/5 is not on a scale up to 10"),
        ("Score: high", SCORE, "no verdict: 'high' is not a number"),
        (
            "I am not sure what to make of this reply.",
            BOOLEAN,
            "no verdict: expected a leading yes/no, pass/fail or true/false",
        ),
        (
            "No verdict is possible here.",
            BOOLEAN,
            "no verdict: expected a leading yes/no, pass/fail or true/false",
        ),
        ("3 reasons why it fails", SCORE, "no verdict: expected a leading number"),
        (
            "The reply is bad.",
            CATEGORIES,
            "no verdict: 'The reply is bad.' names none of correct, partially correct, incorrect",
        ),
    ],
)
def test_unparseable_says_why(text, scale, reason):
    assert parse_verdict(text, scale) == Unparseable(reason, text)


def test_category_values_from_langfuse_are_accepted_as_verdicts():
    scale = ScoreScale("categorical", ("bad", "good"), values=(0, 1))
    assert parse_verdict('{"score": 1}', scale) == ParsedVerdict("good", "")
    assert parse_verdict('{"score": 2}', scale).reason == "no verdict: 2 is not a category name"


def test_tally_counts_parsed_and_groups_reasons_by_cause():
    tally = ParseTally()
    for text in ("Score: 7", "Score: 12", "Score: 0", "", "8"):
        tally.add(parse_verdict(text, SCORE))
    assert (tally.parsed, tally.unparseable, tally.total) == (2, 3, 5)
    assert tally.causes == {"out of range": 2, "empty output": 1}
    assert tally.metrics() == {"parsed": 2, "unparseable": 3, "parse_rate": 0.4}
    assert str(tally) == "2/5 parsed; unparseable: 2 out of range, 1 empty output"
    assert str(ParseTally()) == "0/0 parsed"
