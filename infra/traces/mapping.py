"""The one place that knows Langfuse's shapes: observations v2 and scores.

Scores arrive in two layouts and both are accepted: the v3 API's (`subject` names the
trace or observation; BOOLEAN `value` is a bool, CATEGORICAL `value` is the label) and
the flat one of exports and the older API (`traceId`, `observationId`, numeric `value`
plus `stringValue`). Dicts may hold ISO strings (JSON files) or datetimes (SDK models'
`.dict()`). Judge scores flywheel writes to an outbox go out in the flat layout.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from infra.traces.errors import RecordError, described
from infra.traces.record_shape import check_shape
from infra.traces.types import GENERATION, Annotation, Correction, TraceRecord

if TYPE_CHECKING:
    from infra.traces.feedback import JudgeScore

_DATA_TYPES = ("BOOLEAN", "NUMERIC", "CATEGORICAL")
_SOURCES = ("ANNOTATION", "API", "EVAL")


def trace_from_observation(obs: dict[str, Any]) -> TraceRecord:
    """Map one Langfuse observation (v2 API shape, camelCase keys) to a TraceRecord."""
    _check_record(obs)
    version = obs.get("promptVersion")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
        raise RecordError("promptVersion", f"expected an integer, got {described(version)}")
    tags = obs.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise RecordError("tags", "expected a list of strings")
    return TraceRecord(
        id=_required_str(obs, "id"),
        trace_id=_required_str(obs, "traceId"),
        start_time=_datetime(obs, "startTime"),
        name=_optional_str(obs, "name"),
        input=obs.get("input"),
        output=obs.get("output"),
        prompt_name=_optional_str(obs, "promptName"),
        prompt_version=version,
        tags=tuple(tags),
        metadata=_optional_dict(obs, "metadata"),
        environment=_optional_str(obs, "environment"),
        type=_optional_str(obs, "type") or GENERATION,
        parent_id=_optional_str(obs, "parentObservationId"),
        model=_optional_str(obs, "model"),
        model_parameters=_optional_dict(obs, "modelParameters"),
        session_id=_optional_str(obs, "sessionId"),
    )


def annotation_from_score(score: dict[str, Any]) -> Annotation:
    """Map one Langfuse score (v3 API or flat export shape) to an Annotation."""
    _check_record(score)
    data_type = _choice(score, "dataType", _DATA_TYPES)
    trace_id, observation_id, session_id = _scored(score)
    stamp_key = "timestamp" if score.get("timestamp") is not None else "createdAt"
    return Annotation(
        id=_required_str(score, "id"),
        trace_id=trace_id,
        name=_required_str(score, "name"),
        value=_value(score, data_type),
        data_type=data_type,
        source=_choice(score, "source", _SOURCES),
        timestamp=_datetime(score, stamp_key),
        observation_id=observation_id,
        comment=_optional_str(score, "comment"),
        metadata=_optional_dict(score, "metadata"),
        updated_at=_datetime(score, "updatedAt") if score.get("updatedAt") is not None else None,
        session_id=session_id,
    )


def is_correction(score: Any) -> bool:
    return isinstance(score, dict) and str(score.get("dataType", "")).upper() == "CORRECTION"


def correction_from_score(score: dict[str, Any]) -> Correction:
    """Map one Langfuse corrected output (a CORRECTION score: the text in `value` in the
    v3 API, in `stringValue` in the flat shape) to a Correction."""
    _check_record(score)
    trace_id, observation_id = _subject(score)
    text = score.get("stringValue") if isinstance(score.get("stringValue"), str) else None
    text = text if text is not None else score.get("value")
    if not isinstance(text, str) or not text.strip():
        raise RecordError("value", "a CORRECTION score needs the corrected text")
    stamp_key = "timestamp" if score.get("timestamp") is not None else "createdAt"
    return Correction(
        id=_required_str(score, "id"),
        trace_id=trace_id,
        text=text,
        timestamp=_datetime(score, stamp_key),
        observation_id=observation_id,
    )


def score_from_langfuse(score: dict[str, Any]) -> Annotation | Correction:
    """A score record as what it is: a corrected output, or an annotation."""
    return correction_from_score(score) if is_correction(score) else annotation_from_score(score)


def score_to_langfuse(score: JudgeScore) -> dict[str, Any]:
    """A judge score in the flat export shape `annotation_from_score` reads back.

    The source is API: Langfuse's public API refuses EVAL (reserved for its own
    evaluators) and records scores it receives as API, so an outbox says the same.
    """
    record: dict[str, Any] = {
        "id": score.id,
        "traceId": score.trace_id,
        "name": score.name,
        "value": score.value,
        "dataType": score.data_type,
        "source": "API",
        "timestamp": score.timestamp.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        "comment": score.comment,
        "metadata": score.metadata,
    }
    if score.data_type == "BOOLEAN":
        record["stringValue"] = "True" if score.value == 1 else "False"
    elif score.data_type == "CATEGORICAL":
        record["stringValue"] = score.value
    return record


def _scored(score: dict[str, Any]) -> tuple[str, str | None, str | None]:
    """(trace id, observation id, session id) of an annotation: a session's score has no
    trace yet (an empty id) until it is read onto its last trace."""
    subject = score.get("subject")
    if isinstance(subject, dict) and subject.get("kind") == "session":
        return "", None, _required_str(subject, "id", "subject.id")
    if subject is None and score.get("traceId") is None and score.get("sessionId") is not None:
        return "", None, _required_str(score, "sessionId")
    return *_subject(score), _optional_str(score, "sessionId")


def _subject(score: dict[str, Any]) -> tuple[str, str | None]:
    """(trace id, observation id or None) from either score layout."""
    subject = score.get("subject")
    if subject is None:
        return _required_str(score, "traceId"), _optional_str(score, "observationId")
    if not isinstance(subject, dict):
        raise RecordError("subject", "expected an object")
    kind = subject.get("kind")
    if kind == "trace":
        return _required_str(subject, "id", "subject.id"), None
    if kind == "observation":
        trace_id = _required_str(subject, "traceId", "subject.traceId")
        return trace_id, _required_str(subject, "id", "subject.id")
    raise RecordError("subject.kind", f"{described(kind)} is not a trace or an observation")


def _value(score: dict[str, Any], data_type: str) -> float | str:
    value, label = score.get("value"), score.get("stringValue")
    if data_type == "CATEGORICAL":
        if isinstance(label, str):
            return label
        if isinstance(value, str):
            return value
        raise RecordError("value", "a CATEGORICAL score needs a string value or stringValue")
    if data_type == "BOOLEAN" and isinstance(value, bool):
        return float(value)
    if data_type == "BOOLEAN" and value is None and label in ("True", "False"):
        return 1.0 if label == "True" else 0.0
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RecordError("value", f"a {data_type} score needs a number, got {described(value)}")
    if data_type == "BOOLEAN" and value not in (0, 1):
        raise RecordError("value", f"a BOOLEAN score is 0 or 1, got {described(value)}")
    return float(value)


def _required_str(record: dict[str, Any], key: str, name: str | None = None) -> str:
    value = record.get(key)
    if value is None:
        raise RecordError(name or key, "missing")
    if not isinstance(value, str) or not value:
        raise RecordError(name or key, f"expected a non-empty string, got {described(value)}")
    return value


def _optional_str(record: dict[str, Any], key: str) -> str | None:
    value = record.get(key)
    if value is not None and not isinstance(value, str):
        raise RecordError(key, f"expected a string, got {described(value)}")
    return value


def _optional_dict(record: dict[str, Any], key: str) -> dict[str, Any]:
    value = record.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RecordError(key, f"expected an object, got {type(value).__name__}")
    return value


def _choice(record: dict[str, Any], key: str, allowed: tuple[str, ...]) -> Any:
    value = _required_str(record, key)
    if value not in allowed:
        raise RecordError(key, f"{described(value)} is not one of {', '.join(allowed)}")
    return str(value)  # the SDK's StrEnum members become plain strings


def _datetime(record: dict[str, Any], key: str) -> datetime:
    value = record.get(key)
    if value is None:
        raise RecordError(key, "missing")
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise RecordError(key, f"{described(value)} is not an ISO 8601 time") from None
    if not isinstance(value, datetime):
        raise RecordError(key, f"expected an ISO 8601 time, got {described(value)}")
    # Langfuse times are UTC; a naive one from a hand-made export is read as UTC too.
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _check_record(record: Any) -> None:
    """A JSON object within `record_shape`'s limits, before anything reads into it."""
    if not isinstance(record, dict):
        raise RecordError("<record>", f"expected a JSON object, got {type(record).__name__}")
    check_shape(record)
