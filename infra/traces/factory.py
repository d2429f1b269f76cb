"""The trace source named in settings."""

from __future__ import annotations

from pathlib import Path

from infra.redaction import Redactor
from infra.settings import TraceSettings
from infra.traces.redacting import RedactingTraceSource
from infra.traces.source import TraceSource

OUTBOX = "outbox"  # under the state folder, when traces.outbox_dir is empty


def make_trace_source(
    settings: TraceSettings,
    state_dir: Path,
    redactor: Redactor | None = None,
    timeout_s: int = 30,
) -> TraceSource:
    """The source, its text masked by `redactor` (None: as it is); `timeout_s` per
    request to a server."""
    source = _raw_source(settings, state_dir, timeout_s)
    return source if redactor is None else RedactingTraceSource(source, redactor)


def _raw_source(settings: TraceSettings, state_dir: Path, timeout_s: int) -> TraceSource:
    if settings.source == "langfuse":
        from infra.traces.langfuse_source import LangfuseTraceSource

        return LangfuseTraceSource(settings, timeout_s=timeout_s)
    from infra.traces.jsonl import JsonlTraceSource

    return JsonlTraceSource(settings.jsonl_dir, settings.outbox_dir or state_dir / OUTBOX)
