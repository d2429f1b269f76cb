"""What a judge sees and what a human said about it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

Preference = Literal["A", "B"]


@dataclass(frozen=True)
class JudgedItem:
    """One agent output to judge, with the human label when there is one."""

    id: str  # the trace id: splits are made by trace
    input_text: str
    output_text: str
    human_pass: bool | None = None
    human_comment: str = ""
    # The annotation on its own scale (bool, category name or number), for judges that
    # are aligned on any scale; the boolean path keeps reading `human_pass`.
    human_value: bool | str | float | None = None


@dataclass(frozen=True)
class HeldoutVerdict:
    """One held-out label beside the judge's verdict on it, as its agreement was measured:
    what a confusion matrix and a calibration curve of the judge are drawn from."""

    id: str
    human: bool | str | float  # the label people gave, on the scale
    judged: bool | str | float  # the judge's verdict, as the agreement statistics took it
    # The judge's score in [0, 1] (P(pass), or its verdict placed on the scale's order)
    # and people's label placed on the same order (pass/fail: 1.0 or 0.0); None: the
    # scale has no order to place them on.
    score: float | None = None
    human_score: float | None = None


@dataclass(frozen=True)
class LabelWindow:
    """Which annotations a night learned from: registered with the judge version."""

    labels: int
    first: datetime | None  # the earliest annotation's timestamp
    last: datetime | None
    since: datetime | None  # the fetch's window start; None = all the source had
    fetched_at: datetime | None


@dataclass(frozen=True)
class PairwiseItem:
    """Two answers to one question, with the answer a human preferred when known."""

    id: str
    group: str  # items sharing a group (the question) never land on two sides of a split
    question: str
    answer_a: str
    answer_b: str
    human_prefers: Preference | None = None
    human_comment: str = ""


def render_inputs(inputs: dict[str, Any]) -> str:
    """Agent inputs as the text a judge reads: the value alone when there is one field."""
    if len(inputs) == 1:
        value = next(iter(inputs.values()))
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return json.dumps(inputs, ensure_ascii=False, indent=1)
