"""A trace source whose text comes out masked (`infra.redaction`): the one door through
which production text enters a night, so nothing behind it (the label store, the
reflection model, MLflow, Prefect's persisted results, logs) sees a secret."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from infra.redaction import Redactor
from infra.scales import ScoreScale
from infra.traces.feedback import JudgeScore, LabelRequest
from infra.traces.heldout_runs import HeldoutItem, HeldoutRun, SentRuns
from infra.traces.source import TraceBatch, TraceSource
from infra.traces.types import Annotation, TraceRecord
from infra.types import Example


@dataclass
class RedactingTraceSource:
    inner: TraceSource
    redactor: Redactor

    def fetch(self, since: datetime | None, limit: int) -> TraceBatch:
        return self._batch(self.inner.fetch(since, limit))

    def fetch_labels(
        self, name: str, since: datetime | None, have: Collection[str] = ()
    ) -> TraceBatch:
        return self._batch(self.inner.fetch_labels(name, since, have))

    def heldout_file(self) -> Path | None:
        return self.inner.heldout_file()

    def dataset_examples(self, name: str) -> list[Example]:
        return [self.redactor.example(e) for e in self.inner.dataset_examples(name)]

    def request_labels(self, items: list[LabelRequest]) -> int:
        return self.inner.request_labels(items)

    def pending_label_requests(self) -> set[str]:
        return self.inner.pending_label_requests()

    def write_scores(self, scores: list[JudgeScore]) -> int:
        return self.inner.write_scores(scores)

    def send_heldout_runs(
        self, dataset: str, items: list[HeldoutItem], runs: list[HeldoutRun], at: datetime
    ) -> SentRuns:
        # masked already: the examples came in through this door, the replies from them
        return self.inner.send_heldout_runs(dataset, items, runs, at)

    def score_scale(self, name: str, *, ordinal: bool = False) -> ScoreScale | None:
        return self.inner.score_scale(name, ordinal=ordinal)

    def _batch(self, batch: TraceBatch) -> TraceBatch:
        return TraceBatch(
            traces=[self._trace(t) for t in batch.traces],
            annotations=[self._annotation(a) for a in batch.annotations],
            other_scores=[self._annotation(a) for a in batch.other_scores],
            corrections=[replace(c, text=self.redactor.text(c.text)) for c in batch.corrections],
            skipped=[replace(s, reason=self.redactor.text(s.reason)) for s in batch.skipped],
        )

    def _trace(self, trace: TraceRecord) -> TraceRecord:
        v = self.redactor.value
        return replace(
            trace, input=v(trace.input), output=v(trace.output), metadata=v(trace.metadata)
        )

    def _annotation(self, annotation: Annotation) -> Annotation:
        v = self.redactor.value
        return replace(
            annotation,
            value=v(annotation.value),
            comment=v(annotation.comment),
            metadata=v(annotation.metadata),
        )
