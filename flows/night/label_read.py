"""Tonight's read of one annotation name into the label store, and the labels to date the
judge of that name learns from: the same for the primary criterion and each secondary
one (`traces.criteria`), each with its own watermark in the store."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from flows.night.collect import one_record_per_trace
from flows.night.runtime import Runtime
from infra.traces import Annotation, TraceBatch, TraceRecord


@dataclass
class LabelRead:
    fresh: TraceBatch  # what the source gave for the name from its watermark on
    read: list[Annotation]  # tonight's labels of the name, fresh and in the night's batch
    added: int  # of them, those the store did not hold (new or edited)
    labels: list[tuple[Annotation, TraceRecord]]  # the store's, to date, in the window
    outside_window: int  # stored labels older than judge.label_window_days
    read_all: bool  # every label was read, not from the watermark on

    @property
    def read_to(self) -> datetime | None:
        """The newest label time read tonight (the source's clock): the next watermark."""
        return max((a.timestamp for a in self.read), default=None)


def read_labels(
    rt: Runtime, name: str, batch: TraceBatch, have: set[str], fetched_at: datetime
) -> LabelRead:
    """The labels named `name`: those the source listed from the store's watermark on
    (less `traces.label_overlap_hours`, or all every `traces.label_full_read_days`) and
    those in the night's `batch` join the store; the store's, within
    `judge.label_window_days`, come back. `have`: traces the source need not send again."""
    cfg = rt.settings.traces
    overlap = timedelta(hours=cfg.label_overlap_hours)
    every = timedelta(days=cfg.label_full_read_days) if cfg.label_full_read_days else None
    since = rt.labels.read_from(name, overlap, every)
    fresh = rt.traces.fetch_labels(name, since, have)
    read = [a for a in fresh.annotations + batch.annotations if a.name == name]
    # each labelled trace kept with its steps
    added = rt.labels.add(read, one_record_per_trace(fresh.traces + batch.traces, []))
    days = rt.settings.judge.label_window_days
    stored = rt.labels.labels(name)
    cutoff = fetched_at - timedelta(days=days) if days else None
    labels = [(a, t) for a, t in stored if cutoff is None or a.timestamp >= cutoff]
    return LabelRead(fresh, read, added, labels, len(stored) - len(labels), since is None)
