"""The preflight reads a sample of the night's window as the night reads it: a record the
night will quarantine is named up front and stops nothing; a window of nothing but
such records stops the night before it starts."""

import json
import logging

import pytest

from flows.night.preflight import check_traces
from infra.errors import UserFacingError
from infra.labels import LabelStore
from infra.redaction import Redactor
from infra.settings import TraceSettings
from infra.traces.jsonl import JsonlTraceSource
from infra.traces.redacting import RedactingTraceSource
from tests.infra.test_labels import label, trace
from tests.infra.traces.test_jsonl import obs, score, write

DEEP = json.dumps({**obs(1), "input": "@"}).replace('"@"', "[" * 600 + "]" * 600)


def source(folder, observations):
    write(folder / "observations.jsonl", observations)
    write(folder / "scores.jsonl", [score(2)])
    return RedactingTraceSource(JsonlTraceSource(folder), Redactor.standard())


def test_a_poison_record_in_the_window_is_named_and_stops_nothing(tmp_path, caplog):
    traces = source(tmp_path, [DEEP, obs(2)])
    with caplog.at_level(logging.WARNING, logger="flows.night.preflight"):
        check_traces(traces, TraceSettings(), LabelStore(tmp_path / "labels.sqlite"))
    (line,) = [r.getMessage() for r in caplog.records if r.name == "flows.night.preflight"]
    assert "1 usable trace(s) and 1 record(s) the night will quarantine" in line
    assert "observations.jsonl:1, field input[0][0][0]...: id o1: nested more than" in line


def test_a_window_of_poison_records_stops_the_night_naming_the_first(tmp_path):
    traces = source(tmp_path, [DEEP])
    with pytest.raises(UserFacingError, match="no usable trace; the first left out: id o1: nest"):
        check_traces(traces, TraceSettings(), LabelStore(tmp_path / "labels.sqlite"))


def test_an_empty_window_stops_a_first_night_and_not_a_later_one(tmp_path):
    """A first night with nothing in its window is more likely a wrong source or lookback;
    once labels are kept, an empty window is a quiet day, which the night itself skips
    (issue 57: a scheduled deployment's second night must not stop on a weekend)."""
    traces = source(tmp_path, [obs(2)])  # March 2025: far outside a one-day window
    window = TraceSettings(lookback_hours=24)
    store = LabelStore(tmp_path / "labels.sqlite")
    with pytest.raises(UserFacingError, match="no usable trace since"):
        check_traces(traces, window, store)
    store.add([label("t2", 1.0)], [trace("t2")])  # an earlier night kept a label
    check_traces(traces, window, store)
