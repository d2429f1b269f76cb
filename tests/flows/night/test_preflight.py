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
