"""The trace source named in settings."""

from __future__ import annotations

from infra.settings import TraceSettings
from infra.traces.source import TraceSource


def make_trace_source(settings: TraceSettings) -> TraceSource:
    if settings.source == "langfuse":
        from infra.traces.langfuse_source import LangfuseTraceSource

        return LangfuseTraceSource(settings)
    from infra.traces.jsonl import JsonlTraceSource

    return JsonlTraceSource(settings.jsonl_dir)
