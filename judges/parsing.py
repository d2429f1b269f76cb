"""Reading a verdict out of a judge's free text, for a given score scale.

Judges answer in many shapes: a JSON object (fenced or not, with chatter after it),
"Verdict: ..." / "Score: 7/10" lines, or a bare "Yes." The parser accepts those and
nothing looser: text it cannot read becomes `Unparseable` with the reason, never a
default verdict, because a silent default would bias agreement toward that label.
Callers count both outcomes with `ParseTally` and report the parse rate.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from infra.scales import ScoreScale

# In priority order: {"verdict": "pass", "score": 0.9} means pass, 0.9 being a confidence.
VERDICT_KEYS = ("verdict", "label", "score", "rating", "decision", "grade")
RATIONALE_KEYS = ("rationale", "reason", "reasoning", "explanation")
BOOLEAN_WORDS = {
    **dict.fromkeys(("yes", "pass", "passed", "true"), True),
    **dict.fromkeys(("no", "fail", "failed", "false"), False),
}

_FENCE = re.compile(r"```[\w-]*[ \t]*\n?(.*?)(?:```|\Z)", re.S)  # an unclosed one runs to the end
_KEY_LINE = re.compile(
    rf"^[ \t>*_#-]*({'|'.join(VERDICT_KEYS + RATIONALE_KEYS)})[ \t*_]*[:=][ \t*_]*(.*)$",
    re.I | re.M,
)
_WORDS = "|".join(BOOLEAN_WORDS)
# A bare answer must stand alone ("No." / "Yes, because"), so "No verdict is possible"
# or "True to its brief, ..." do not read as verdicts.
_BARE_BOOLEAN = re.compile(rf"^[\s*_#>]*({_WORDS})[ \t*_]*(?=[\n.,:;!)\-–—]|$)", re.I)
_BOOLEAN_WORD = re.compile(rf"\b({_WORDS})\b", re.I)
_NUMBER = r"-?\d+(?:\.\d+)?"
_SCORE = re.compile(rf"^[\s*_#>]*({_NUMBER})(?:\s*(?:/|out of)\s*({_NUMBER}))?", re.I)
_BARE_SCORE = re.compile(_SCORE.pattern + r"[ \t*_]*(?=[\n.,:;!)\-–—]|$)", re.I)


@dataclass(frozen=True)
class ParsedVerdict:
    value: bool | str | float  # bool, a category name as the scale spells it, or a number
    rationale: str


@dataclass(frozen=True)
class Unparseable:
    reason: str  # "<cause>: <details>", e.g. "out of range: 12 is outside [1, 10]"
    text: str

    @property
    def cause(self) -> str:
        return self.reason.partition(":")[0]


class _Fail(Exception):
    """Raised anywhere below; `parse_verdict` turns it into one Unparseable."""


def parse_verdict(text: str, scale: ScoreScale) -> ParsedVerdict | Unparseable:
    if not text or not text.strip():
        return Unparseable("empty output", text)
    try:
        found = _from_json(text) or _from_lines(text) or _from_bare(text, scale)
        raw, rationale = found
        return ParsedVerdict(_read(raw, scale), rationale.strip())
    except _Fail as fail:
        return Unparseable(str(fail), text)


@dataclass
class ParseTally:
    """How many judge outputs parsed, and why the others did not (grouped by cause)."""

    parsed: int = 0
    causes: Counter[str] = field(default_factory=Counter)

    def add(self, result: ParsedVerdict | Unparseable) -> ParsedVerdict | Unparseable:
        if isinstance(result, ParsedVerdict):
            self.parsed += 1
        else:
            self.causes[result.cause] += 1
        return result

    @property
    def unparseable(self) -> int:
        return sum(self.causes.values())

    @property
    def total(self) -> int:
        return self.parsed + self.unparseable

    def metrics(self) -> dict[str, float]:
        rate = self.parsed / self.total if self.total else 0.0
        return {"parsed": self.parsed, "unparseable": self.unparseable, "parse_rate": rate}

    def __str__(self) -> str:
        causes = ", ".join(f"{n} {cause}" for cause, n in self.causes.most_common())
        return f"{self.parsed}/{self.total} parsed" + (f"; unparseable: {causes}" if causes else "")


def _from_json(text: str) -> tuple[Any, str] | None:
    fence = _FENCE.search(text)
    body = fence.group(1) if fence else text
    start = body.find("{")
    if start < 0:
        return None
    try:
        obj, _ = json.JSONDecoder().raw_decode(body, start)
    except json.JSONDecodeError as error:
        if fence or not body[:start].strip():  # meant as JSON, not a brace inside prose
            raise _Fail(f"broken JSON: {error.msg} (char {error.pos})") from None
        return None
    fields = {key.lower(): value for key, value in obj.items() if isinstance(key, str)}
    verdict_key = next((key for key in VERDICT_KEYS if key in fields), None)
    if verdict_key is None:
        raise _Fail(f"no verdict: the JSON has none of the keys {', '.join(VERDICT_KEYS)}")
    reason = next((fields[key] for key in RATIONALE_KEYS if key in fields), "")
    return fields[verdict_key], reason if isinstance(reason, str) else json.dumps(reason)


def _from_lines(text: str) -> tuple[Any, str] | None:
    lines = list(_KEY_LINE.finditer(text))
    keys = [m.group(1).lower() for m in lines]
    verdict_key = next((key for key in VERDICT_KEYS if key in keys), None)
    if verdict_key is None:
        return None
    verdicts = {m.group(2).strip(" \t*_") for m in lines if m.group(1).lower() == verdict_key}
    if len(verdicts) > 1:
        raise _Fail(f"conflicting verdicts: {', '.join(map(repr, sorted(verdicts)))}")
    for i, m in enumerate(lines):
        if m.group(1).lower() in RATIONALE_KEYS:  # runs until the next key line
            end = lines[i + 1].start() if i + 1 < len(lines) else len(text)
            return verdicts.pop(), text[m.start(2) : end]
    return verdicts.pop(), _unfenced(_KEY_LINE.sub("", text))  # no Rationale line: the rest


def _from_bare(text: str, scale: ScoreScale) -> tuple[Any, str]:
    if scale.kind == "categorical":  # the first line names it ("Partially correct: ...")
        return text.strip().partition("\n")[0], _unfenced(text)
    pattern = _BARE_BOOLEAN if scale.kind == "boolean" else _BARE_SCORE
    m = pattern.match(text)
    if m is None:
        expected = "yes/no, pass/fail or true/false" if scale.kind == "boolean" else "number"
        raise _Fail(f"no verdict: expected a leading {expected}")
    return m.group(0), _unfenced(text[m.end() :]).lstrip(" \t.,:;!)-–—")


def _unfenced(text: str) -> str:
    return re.sub(r"^[ \t]*```.*$", "", text, flags=re.M).strip()


def _read(raw: Any, scale: ScoreScale) -> bool | str | float:
    if scale.kind == "boolean":
        return _read_boolean(raw)
    if scale.kind == "categorical":
        return _read_category(raw, scale)
    return _read_number(raw, scale)


def _read_boolean(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, int | float) and raw in (0, 1):  # Langfuse stores booleans as 1/0
        return bool(raw)
    if not isinstance(raw, str):
        raise _Fail(f"no verdict: {raw!r} is not a boolean")
    found = {BOOLEAN_WORDS[w.lower()] for w in _BOOLEAN_WORD.findall(raw)}
    if len(found) > 1:
        raise _Fail(f"ambiguous: {raw!r} says both pass and fail")
    if not found:
        raise _Fail(f"no verdict: {raw!r} is not yes/no, pass/fail or true/false")
    return found.pop()


def _read_category(raw: Any, scale: ScoreScale) -> str:
    if isinstance(raw, int | float) and not isinstance(raw, bool) and scale.values:
        named = [c for c, v in zip(scale.categories, scale.values, strict=True) if v == raw]
        if len(named) == 1:  # a judge that answers with the Langfuse category value
            return named[0]
    if not isinstance(raw, str):
        raise _Fail(f"no verdict: {raw!r} is not a category name")
    matches = [
        (m.start(), m.end(), category)
        for category in scale.categories
        for m in re.finditer(rf"(?<!\w){re.escape(category)}(?!\w)", raw, re.I)
    ]
    # "partially correct" also contains "correct": a match inside a longer one is not one.
    named = {
        category
        for a, b, category in matches
        if not any(x <= a and b <= y and (x, y) != (a, b) for x, y, _ in matches)
    }
    if len(named) > 1:
        raise _Fail(f"ambiguous: {raw!r} names {', '.join(sorted(named))}")
    if not named:
        raise _Fail(f"no verdict: {raw!r} names none of {', '.join(scale.categories)}")
    return named.pop()


def _read_number(raw: Any, scale: ScoreScale) -> float:
    denominator = None
    if isinstance(raw, str) and (m := _SCORE.match(raw)):
        raw, denominator = float(m.group(1)), m.group(2) and float(m.group(2))
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise _Fail(f"no verdict: {raw!r} is not a number")
    high = scale.maximum
    # "3/10" on a 1-5 scale is in range by accident: rescaling it would be a guess.
    if denominator is not None and high is not None and denominator != high:
        raise _Fail(f"out of range: {raw:g}/{denominator:g} is not on a scale up to {high:g}")
    if not scale.contains(float(raw)):
        lo = "-inf" if scale.minimum is None else f"{scale.minimum:g}"
        hi = "inf" if scale.maximum is None else f"{scale.maximum:g}"
        raise _Fail(f"out of range: {raw:g} is outside [{lo}, {hi}]")
    return float(raw)
