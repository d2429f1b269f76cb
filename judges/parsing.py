"""Reading a verdict out of a judge's free text, for a given score scale.

Judges answer in many shapes: a JSON object (fenced or not, with chatter after it),
"Verdict: ..." / "Score: 7/10" lines, or a bare "Yes." The parser accepts those and
nothing looser: text it cannot read becomes `Unparseable` with the reason, never a
default verdict, because a silent default would bias agreement toward that label.
Callers count both outcomes with `ParseTally` and report the parse rate. The shapes are
the same on every scale; what a bare answer looks like and how a verdict is read as a
value is the scale's kind's (`judges.kinds`).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from infra.scales import ScoreScale
from judges.kinds import kind_of
from judges.kinds.text import NoVerdict, unfenced

# In priority order: {"verdict": "pass", "score": 0.9} means pass, 0.9 being a confidence.
VERDICT_KEYS = ("verdict", "label", "score", "rating", "decision", "grade")
RATIONALE_KEYS = ("rationale", "reason", "reasoning", "explanation")

_FENCE = re.compile(r"```[\w-]*[ \t]*\n?(.*?)(?:```|\Z)", re.S)  # an unclosed one runs to the end
_KEY_LINE = re.compile(
    rf"^[ \t>*_#-]*({'|'.join(VERDICT_KEYS + RATIONALE_KEYS)})[ \t*_]*[:=][ \t*_]*(.*)$",
    re.I | re.M,
)


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


def parse_verdict(text: str, scale: ScoreScale) -> ParsedVerdict | Unparseable:
    if not text or not text.strip():
        return Unparseable("empty output", text)
    kind = kind_of(scale)
    try:  # NoVerdict, raised anywhere below, is the one Unparseable
        raw, rationale = _from_json(text) or _from_lines(text) or kind.bare(text)
        return ParsedVerdict(kind.read(raw), rationale.strip())
    except NoVerdict as fail:
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
            raise NoVerdict(f"broken JSON: {error.msg} (char {error.pos})") from None
        return None
    fields = {key.lower(): value for key, value in obj.items() if isinstance(key, str)}
    verdict_key = next((key for key in VERDICT_KEYS if key in fields), None)
    if verdict_key is None:
        raise NoVerdict(f"no verdict: the JSON has none of the keys {', '.join(VERDICT_KEYS)}")
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
        raise NoVerdict(f"conflicting verdicts: {', '.join(map(repr, sorted(verdicts)))}")
    for i, m in enumerate(lines):
        if m.group(1).lower() in RATIONALE_KEYS:  # runs until the next key line
            end = lines[i + 1].start() if i + 1 < len(lines) else len(text)
            return verdicts.pop(), text[m.start(2) : end]
    return verdicts.pop(), unfenced(_KEY_LINE.sub("", text))  # no Rationale line: the rest
