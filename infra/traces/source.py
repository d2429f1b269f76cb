"""The trace-source seam: where production traces and their scores come from, and where
the judge's label requests and scores, and the night's held-out evaluations, go back to."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from infra.errors import UserFacingError
from infra.scales import ScoreScale
from infra.traces.feedback import JudgeScore, LabelRequest
from infra.traces.heldout_runs import HeldoutItem, HeldoutRun, SentRuns
from infra.traces.types import Annotation, Correction, TraceRecord
from infra.types import Example


class TraceSourceError(UserFacingError):
    """A source that cannot be read at all; the message says how to fix it."""


@dataclass(frozen=True)
class SkippedRecord:
    """A record left out because it could not be mapped; `line` is 1-based."""

    file: str
    line: int
    field: str
    reason: str


@dataclass
class TraceBatch:
    """What one fetch returns.

    `annotations` holds human scores only (source ANNOTATION); scores from the API or
    from evaluators are kept apart in `other_scores`, so no stage mistakes a machine's
    score for a human label.
    """

    traces: list[TraceRecord] = field(default_factory=list)
    annotations: list[Annotation] = field(default_factory=list)
    other_scores: list[Annotation] = field(default_factory=list)
    corrections: list[Correction] = field(default_factory=list)  # on the batch's traces
    skipped: list[SkippedRecord] = field(default_factory=list)


class TraceSource(Protocol):
    def fetch(self, since: datetime | None, limit: int) -> TraceBatch:
        """Traces started at or after `since` (all when None), at most `limit` of them,
        and the scores on those traces."""
        ...

    def fetch_labels(
        self, name: str, since: datetime | None, have: Collection[str] = ()
    ) -> TraceBatch:
        """Human annotations named `name` made at or after `since` (all when None), and the
        traces they are on, however old (a label added days after its trace is read), but
        those in `have`: the caller holds them already."""
        ...

    def heldout_file(self) -> Path | None:
        """A held-out file that comes with the traces (a JSONL export's heldout.jsonl), or
        None: production traces have no true labels, so `eval.heldout_path` must name one."""
        ...

    def dataset_examples(self, name: str) -> list[Example]:
        """Held-out examples from the source's dataset `name` (Langfuse datasets: items
        with expected outputs); a source without datasets raises TraceSourceError."""
        ...

    def request_labels(self, items: list[LabelRequest]) -> int:
        """Ask humans to label these traces; returns how many requests were sent."""
        ...

    def pending_label_requests(self) -> set[str]:
        """Trace ids already sent for labelling and not yet done: not to be asked again."""
        ...

    def write_scores(self, scores: list[JudgeScore]) -> int:
        """Store judge verdicts as scores on their traces; returns how many were written."""
        ...

    def send_heldout_runs(
        self, dataset: str, items: list[HeldoutItem], runs: list[HeldoutRun], at: datetime
    ) -> SentRuns:
        """Store the held-out examples as the items of `dataset` and each evaluated version
        as a run over them, its scores stamped `at`; sent again, nothing is added twice."""
        ...

    def score_scale(self, name: str, *, ordinal: bool = False) -> ScoreScale | None:
        """The scale of the score config in force named `name`, or None when the source has
        no such config: then the scale is inferred from the annotations themselves. Sources
        do not say whether categories are ranked: `ordinal` does. A config that cannot be
        read raises a UserFacingError naming it."""
        ...


def newest_active_config(found: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Of same-named score configs (public API shape), the one in force: configs are
    immutable, so a changed scale is a new config and the old one archived."""
    if not found:
        return None
    return max(found, key=lambda c: (not c.get("isArchived", False), c.get("createdAt", "")))


def as_utc(since: datetime | None) -> datetime | None:
    """Trace times are UTC-aware; a naive `since` is read as UTC so the two compare."""
    return since.replace(tzinfo=UTC) if since and since.tzinfo is None else since
