"""The trace source named in settings."""

from __future__ import annotations

from pathlib import Path

from infra.settings import TraceSettings
from infra.traces.source import TraceSource

OUTBOX = "outbox"  # under the state folder, when traces.outbox_dir is empty


def make_trace_source(settings: TraceSettings, state_dir: Path) -> TraceSource:
    if settings.source == "langfuse":
        from infra.traces.langfuse_source import LangfuseTraceSource

        return LangfuseTraceSource(settings)
    from infra.traces.jsonl import JsonlTraceSource

    return JsonlTraceSource(settings.jsonl_dir, settings.outbox_dir or state_dir / OUTBOX)
