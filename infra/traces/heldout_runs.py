"""A night's held-out evaluations, sent back to the trace source as a dataset and its runs.

Each held-out example becomes one dataset item and each evaluated version one run over
those items: its reply and its score per item, the numbers the promotion gate decided
on. Ids are derived from the dataset and the example, never drawn, so a night sent again
(resumed, or retried after a blip) updates what it sent instead of adding a copy.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass, field
from typing import Any

from infra.traces.errors import RecordError

SCORE_NAME = "flywheel_score"  # the true-label score where known, else the night's judge's


@dataclass(frozen=True)
class HeldoutItem:
    """One held-out example as a dataset item: the agent's inputs, the true answer where
    one is known, and the production trace it was held out from (None: it came from a
    held-out file or a dataset, not from the night's traces)."""

    example_id: str
    input: dict[str, Any]
    expected_output: str | None = None
    trace_id: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.example_id, str) or not self.example_id:
            raise RecordError("example_id", f"held-out item: got {self.example_id!r}")
        if not isinstance(self.input, dict):
            raise RecordError("input", f"held-out item {self.example_id}: expected an object")

    def item_id(self, dataset: str) -> str:
        """The item's id in `dataset`: Langfuse upserts items on it, and wants it unique
        across the project's datasets, hence the dataset in it."""
        return str(uuid.uuid5(uuid.NAMESPACE_URL, f"flywheel/{dataset}/{self.example_id}"))


@dataclass(frozen=True)
class HeldoutRun:
    """One version's held-out evaluation: per example id, its reply and its score."""

    name: str  # the version, as the run is named: "candidate: agent v8, night ..."
    replies: dict[str, str]
    scores: dict[str, float]
    description: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise RecordError("name", f"held-out run: got {self.name!r}")
        for example, score in self.scores.items():
            if isinstance(score, bool) or not isinstance(score, int | float):
                raise RecordError("scores", f"run {self.name!r}, example {example}: {score!r}")
            if not math.isfinite(score):
                raise RecordError("scores", f"run {self.name!r}, example {example}: {score!r}")

    def scored(self, items: list[HeldoutItem]) -> list[HeldoutItem]:
        """The items this run has a reply and a score for: one run item each."""
        return [i for i in items if i.example_id in self.scores and i.example_id in self.replies]


@dataclass(frozen=True)
class SentRuns:
    """What the source holds now: the dataset, its items, and each run's items."""

    dataset: str
    items: int
    runs: dict[str, int] = field(default_factory=dict)  # run name -> its run items
    link: str = ""  # the dataset's page, "" when the source has none or cannot say
