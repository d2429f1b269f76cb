"""Langfuse sessions: the traces of one conversation, and people's scores on a whole one.

An agent that holds a conversation traces each turn as a trace, all with one `sessionId`.
A turn's reply is right or wrong by what was said before it, so each trace of a session
carries the conversation before it (`TraceRecord.conversation`): the request and reply of
each earlier trace of the session that was read, oldest first, the last `MAX_TURNS` of
them. The judge reads it before the turn (`judges.trajectory`), on a trace as logged and
on a candidate's replay of it alike.

People may score a whole session in Langfuse (a score whose subject is the session). Such
a score is read as a score on the session's last trace made before it (the conversation
as the reviewer saw it), which then carries the whole conversation before its own turn:
it trains and gates the judge like any other label. A session score none of whose traces
was read is skipped, named, until they are.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

from infra.traces.source import SkippedRecord
from infra.traces.types import Annotation, TraceRecord

MAX_TURNS = 8  # earlier turns a trace carries: a judge's context is short


def in_sessions(traces: list[TraceRecord]) -> list[TraceRecord]:
    """`traces` (one record per trace), each trace of a session with the conversation
    before it among them; traces outside any session unchanged, the order kept."""
    before: dict[str, tuple[tuple[str, str], ...]] = {}
    for turns in _turns_by_session(traces).values():
        for n, trace in enumerate(turns):
            earlier = turns[max(0, n - MAX_TURNS) : n]
            before[trace.trace_id] = tuple((t.user_text, t.output_text) for t in earlier)
    return [
        replace(t, conversation=before[t.trace_id]) if before.get(t.trace_id) else t for t in traces
    ]


def on_last_traces(
    annotations: list[Annotation], traces: list[TraceRecord], skipped: list[SkippedRecord]
) -> list[Annotation]:
    """`annotations` with each session's score on that session's last trace among
    `traces` started before it was made (else its last trace); one whose session has no
    trace among them is left out, and named in `skipped`."""
    sessions = _turns_by_session(traces)
    out = []
    for annotation in annotations:
        if annotation.trace_id or not annotation.session_id:
            out.append(annotation)
            continue
        turns = sessions.get(annotation.session_id, [])
        if not turns:
            reason = (
                f"score {annotation.id}: session {annotation.session_id} has no trace that "
                "was read; it is read with the session's traces"
            )
            skipped.append(SkippedRecord("scores", 0, "sessionId", reason))
            continue
        seen = [t for t in turns if t.start_time <= annotation.timestamp] or turns
        out.append(replace(annotation, trace_id=seen[-1].trace_id))
    return out


def _turns_by_session(traces: list[TraceRecord]) -> dict[str, list[TraceRecord]]:
    """Session id -> its traces among `traces`, oldest first."""
    sessions: dict[str, list[TraceRecord]] = defaultdict(list)
    for trace in sorted(traces, key=lambda t: t.start_time):  # stable: ties keep order
        if trace.session_id:
            sessions[trace.session_id].append(trace)
    return sessions
