"""What flywheel sends back to the trace source: label requests and judge scores.

Both are checked when made, so a bad one fails with its trace and field named before
anything is sent, rather than as a vague 400 from the server halfway through a batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from infra.traces.mapping import RecordError

WRITABLE_DATA_TYPES = ("BOOLEAN", "NUMERIC", "CATEGORICAL")


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

    `value` follows Langfuse: 1.0 / 0.0 for BOOLEAN, a number for NUMERIC, the category
    for CATEGORICAL. `id` and `timestamp` are fixed by the caller: Langfuse updates a
    score sent again with the same id and timestamp instead of adding a second one.
    """

    id: str
    trace_id: str
    name: str
    value: float | str
    timestamp: datetime
    data_type: str = "BOOLEAN"
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
        if self.data_type not in WRITABLE_DATA_TYPES:
            raise RecordError(
                "data_type", f"{what}: {self.data_type!r} is not one of {WRITABLE_DATA_TYPES}"
            )
        if self.data_type == "CATEGORICAL":
            if not isinstance(self.value, str):
                raise RecordError("value", f"{what}: a CATEGORICAL value is a string")
        elif isinstance(self.value, bool) or not isinstance(self.value, int | float):
            raise RecordError("value", f"{what}: a {self.data_type} value is a number")
        elif not math.isfinite(self.value) or (
            self.data_type == "BOOLEAN" and self.value not in (0, 1)
        ):
            raise RecordError("value", f"{what}: {self.value!r} is not a valid {self.data_type}")


def _check_trace_id(what: str, trace_id: Any) -> None:
    if not isinstance(trace_id, str) or not trace_id:
        raise RecordError("trace_id", f"{what}: expected a non-empty string, got {trace_id!r}")
