"""Production traces and the human annotations on them, from Langfuse or a JSONL export;
label requests and judge scores back to them."""

from infra.traces.errors import RecordError
from infra.traces.feedback import JudgeScore, LabelRequest
from infra.traces.jsonl import JsonlTraceSource
from infra.traces.mapping import annotation_from_score, trace_from_observation
from infra.traces.source import SkippedRecord, TraceBatch, TraceSource, TraceSourceError
from infra.traces.types import Annotation, TraceRecord

__all__ = [
    "Annotation",
    "JsonlTraceSource",
    "JudgeScore",
    "LabelRequest",
    "RecordError",
    "SkippedRecord",
    "TraceBatch",
    "TraceRecord",
    "TraceSource",
    "TraceSourceError",
    "annotation_from_score",
    "trace_from_observation",
]
