"""What flywheel sends back to the trace source: label requests and judge scores.

Both are checked when made, so a bad one fails with its trace and field named before
anything is sent, rather than as a vague 400 from the server halfway through a batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from infra.scales import KINDS, Kind
from infra.traces.errors import RecordError
from infra.traces.types import DATA_TYPE_OF, ScoreDataType


@dataclass(frozen=True)
class LabelRequest:
    """A trace a human should label: the judge was least sure about it."""

    trace_id: str
    reason: str
    margin: float  # |p_pass - threshold| of the judge that asks
    judge_version: str  # e.g. "agent-judge-rubric v3"

    def __post_init__(self) -> None:
        _check_trace_id("label request", self.trace_id)
        if not (isinstance(self.margin, int | float) and math.isfinite(self.margin)):
            raise RecordError("margin", f"label request for trace {self.trace_id}: {self.margin!r}")


@dataclass(frozen=True)
class JudgeScore:
    """A judge's verdict on a production trace, written as a (non-human) score.

    `value` is 1.0 / 0.0 for a boolean score, a number for a numeric one, the category
    for a categorical one. `id` and `timestamp` are fixed by the caller: Langfuse updates
    a score sent again with the same id and timestamp instead of adding a second one.
    """

    id: str
    trace_id: str
    name: str
    value: float | str
    timestamp: datetime
    kind: Kind = "boolean"
    comment: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        what = f"judge score for trace {self.trace_id!r}"
        _check_trace_id("judge score", self.trace_id)
        for key in ("id", "name"):
            if not isinstance(getattr(self, key), str) or not getattr(self, key):
                raise RecordError(key, f"{what}: expected a non-empty string")
        if not isinstance(self.timestamp, datetime) or self.timestamp.tzinfo is None:
            raise RecordError("timestamp", f"{what}: expected a timezone-aware datetime")
        if self.kind not in KINDS:
            raise RecordError("kind", f"{what}: {self.kind!r} is not one of {KINDS}")
        if self.kind == "categorical":
            if not isinstance(self.value, str):
                raise RecordError("value", f"{what}: a categorical value is a string")
        elif isinstance(self.value, bool) or not isinstance(self.value, int | float):
            raise RecordError("value", f"{what}: a {self.kind} value is a number")
        elif not math.isfinite(self.value) or (self.kind == "boolean" and self.value not in (0, 1)):
            raise RecordError("value", f"{what}: {self.value!r} is not a valid {self.kind} value")

    @property
    def data_type(self) -> ScoreDataType:
        """Langfuse's name for the score's kind: BOOLEAN, CATEGORICAL or NUMERIC."""
        return DATA_TYPE_OF[self.kind]


def _check_trace_id(what: str, trace_id: Any) -> None:
    if not isinstance(trace_id, str) or not trace_id:
        raise RecordError("trace_id", f"{what}: expected a non-empty string, got {trace_id!r}")
