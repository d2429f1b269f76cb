"""The preflight's look at the trace source: a sample of the night's real window, read
and masked as the night will read it, so a window the night cannot learn from stops the
night before it starts, and records the night will quarantine are named up front."""

from __future__ import annotations

import logging

from flows.night.collect import window_start
from infra.errors import UserFacingError
from infra.labels import LabelStore
from infra.settings import TraceSettings
from infra.traces import TraceSource

log = logging.getLogger(__name__)

# One page of a Langfuse listing: enough to meet the odd broken record of a window
# (one record told only whether the first one read), few enough to stay quick.
SAMPLE = 100


def check_traces(traces: TraceSource, cfg: TraceSettings, labels: LabelStore) -> None:
    """UserFacingError when the window's sample holds no usable trace on a first night (no
    label kept yet: more likely a wrong source or window than a quiet day) or only broken
    records, or when no human label exists at all; a warning naming the sample's
    quarantined records. A later night's empty window is a quiet day (a weekend): the night
    runs, skips what needs traces and says so."""
    since = window_start(cfg.lookback_hours)
    batch = traces.fetch(since=since, limit=SAMPLE)
    first = batch.skipped[0] if batch.skipped else None
    quiet = not batch.traces and not first and labels.labels(cfg.annotation_name)
    if quiet:
        log.info("No trace since %s: a quiet day; the night skips what needs traces.", since)
    elif not batch.traces:
        window = f" since {since:%Y-%m-%d %H:%M} UTC" if since else ""
        why = f"; the first left out: {first.reason}" if first else ""
        raise UserFacingError(
            f"The trace source has no usable trace{window}{why}: a night needs traces "
            "to learn from (check traces.source and traces.lookback_hours)."
        )
    if first:
        log.warning(
            "The window's sample has %d usable trace(s) and %d record(s) the night will "
            "quarantine; the first: %s:%d, field %s: %s",
            len(batch.traces),
            len(batch.skipped),
            first.file,
            first.line,
            first.field,
            first.reason,
        )
    name = cfg.annotation_name
    if not labels.labels(name):  # none kept from earlier nights: the source's
        found = traces.fetch_labels(name, since=None)
        if not any(a.name == name for a in found.annotations):
            raise UserFacingError(
                f"No human annotation named {name!r} on any trace: the judge learns "
                "from people's labels, so annotate some traces (or set "
                "traces.annotation_name to the score your team uses)."
            )
