"""What one record may hold before anything walks it.

Every walk downstream of the mapping (masking, the label store's JSON, Prefect hashing
and persisting results) recurses once per level of nesting, so a trace nested 600 deep
would raise RecursionError in the middle of a night's batch and end the night; bytes or
a set cannot be stored as JSON, and a NaN label compares with nothing. So each record is
checked here, with an explicit stack rather than recursion, and one that breaks a limit
raises a RecordError naming its field: the source quarantines it and reads the rest.
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Any

from infra.traces.errors import RecordError

# Far deeper than any chat, tool call or JSON schema, and a tenth of Python's recursion
# limit, so every recursive walk downstream has room to spare.
MAX_DEPTH = 100
# Characters of text plus values, across the record: the JSONL export's 1 MiB a line.
MAX_SIZE = 1 << 20
# Fields later read as JSON when they hold JSON text (`TraceRecord.messages`): Langfuse's
# observations API sends input and output as strings, so their nesting hides inside.
JSON_TEXT_FIELDS = ("input", "output")
SHOWN_PARTS = 4  # of a field's path in a message: a deep one would fill the log line


def check_shape(record: dict[str, Any]) -> None:
    """Raise RecordError(field, why) for a record nested past MAX_DEPTH, larger than
    MAX_SIZE, or holding a value JSON has no place for (bytes, a set, NaN, a key that is
    not a string)."""
    size = 0
    stack: list[tuple[tuple[str, ...], Any]] = [((key,), value) for key, value in record.items()]
    for key in JSON_TEXT_FIELDS:
        decoded = _json_text(record.get(key), key)
        if decoded is not None:
            stack.append(((key,), decoded))
    while stack:
        path, value = stack.pop()
        if len(path) > MAX_DEPTH:
            raise RecordError(_field(path), f"nested more than {MAX_DEPTH} levels deep")
        size += len(value) if isinstance(value, str) else 1
        if size > MAX_SIZE:
            raise RecordError(_field(path), f"the record is past the {MAX_SIZE:,}-character limit")
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    why = f"holds a key of type {type(key).__name__}, not a string"
                    raise RecordError(_field(path), why)
                stack.append(((*path, key), item))
        elif isinstance(value, list | tuple):
            stack.extend(((*path, f"[{i}]"), item) for i, item in enumerate(value))
        elif isinstance(value, float) and not math.isfinite(value):
            raise RecordError(_field(path), f"{value} is not a JSON number")
        elif value is not None and not isinstance(value, str | int | float | datetime):
            raise RecordError(_field(path), f"holds {type(value).__name__}, which is not JSON")


def _json_text(value: Any, key: str) -> Any:
    """The value `value` encodes when it is JSON text of a list or an object, else None."""
    if not isinstance(value, str) or value.lstrip()[:1] not in ("[", "{"):
        return None
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return None  # plain text that starts with a bracket
    except RecursionError:
        raise RecordError(key, "its JSON text is nested too deeply to read") from None
    except ValueError:  # an integer of more digits than Python converts
        raise RecordError(key, "its JSON text holds a number too long to read") from None


def _field(path: tuple[str, ...]) -> str:
    shown = "".join(p if p.startswith("[") else f".{p}" for p in path[:SHOWN_PARTS])
    return shown.removeprefix(".") + ("..." if len(path) > SHOWN_PARTS else "")
