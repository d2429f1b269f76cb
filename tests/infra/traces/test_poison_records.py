"""One poison record costs only itself: nested past any walk's reach, too large, or
holding what JSON has no place for, it is quarantined by name and the rest is read."""

import json
import math

import pytest

from infra.redaction import Redactor
from infra.settings import TraceSettings
from infra.traces.jsonl import JsonlTraceSource
from infra.traces.langfuse_source import LangfuseTraceSource
from infra.traces.record_shape import MAX_DEPTH
from infra.traces.redacting import RedactingTraceSource
from tests.infra.traces import test_jsonl as jsonl
from tests.infra.traces.test_langfuse import FakeApi, obs, score


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def masked(source):
    """As a night reads it: masking walks every value, so it meets each poison record."""
    return RedactingTraceSource(source, Redactor.standard())


def test_jsonl_quarantines_each_poison_line_by_name_and_reads_the_rest(tmp_path):
    deep_600 = json.dumps({**jsonl.obs(2), "input": "@"}).replace('"@"', nested(600))
    deep_10k = json.dumps({**jsonl.obs(3), "input": "@"}).replace('"@"', nested(10_000))
    deep_text = {**jsonl.obs(4), "input": nested(10_000)}  # JSON text, read as JSON later
    huge = {**jsonl.obs(5), "output": "x" * (2 << 20)}
    long_number = json.dumps(jsonl.obs(6)).replace('"route"', "9" * 5000)
    nan_value = {**jsonl.score(1), "value": math.nan}
    jsonl.write(
        tmp_path / "observations.jsonl",
        [jsonl.obs(1), deep_600, deep_10k, deep_text, huge, long_number, jsonl.obs(7)],
    )
    jsonl.write(tmp_path / "scores.jsonl", [nan_value, jsonl.score(7)])

    batch = masked(JsonlTraceSource(tmp_path)).fetch(since=None, limit=100)

    assert [t.id for t in batch.traces] == ["o1", "o7"]
    assert [a.id for a in batch.annotations] == ["s7-ANNOTATION"]
    why = [(s.line, s.field, s.reason) for s in batch.skipped]
    assert why == [
        (2, "input[0][0][0]...", f"id o2: nested more than {MAX_DEPTH} levels deep"),
        (3, "<json>", "nested too deeply to read"),
        (4, "input", "id o4: its JSON text is nested too deeply to read"),
        (5, "<record>", "2.0 MiB is past the 1 MiB limit"),
        (6, "<json>", "holds a number too long to read"),
        (1, "value", "id s1-ANNOTATION: nan is not a JSON number"),
    ]


def test_a_record_just_within_the_depth_limit_is_read(tmp_path):
    within = json.dumps({**jsonl.obs(1), "metadata": {"a": "@"}})
    within = within.replace('"@"', nested(MAX_DEPTH - 2))  # metadata, a, then the lists
    jsonl.write(tmp_path / "observations.jsonl", [within])
    jsonl.write(tmp_path / "scores.jsonl", [])
    batch = masked(JsonlTraceSource(tmp_path)).fetch(since=None, limit=100)
    assert [t.id for t in batch.traces] == ["o1"] and batch.skipped == []


def deep_object(depth: int) -> list:
    """Built by hand: json.loads would stop at Python's recursion limit first."""
    root = current = []
    for _ in range(depth - 1):
        current.append([])
        current = current[0]
    return root


@pytest.mark.parametrize(
    ("poison", "field", "why"),
    [
        ({"input": deep_object(600)}, "input[0][0][0]...", "nested more than 100 levels deep"),
        ({"input": deep_object(2_000)}, "<record>", "nested too deeply to read"),
        ({"input": nested(600)}, "input[0][0][0]...", "nested more than 100 levels deep"),
        ({"input": nested(10_000)}, "input", "its JSON text is nested too deeply to read"),
        ({"output": "x" * (2 << 20)}, "output", "the record is past the 1,048,576-character limit"),
        ({"metadata": {"raw": b"\x00\x01"}}, "metadata.raw", "holds bytes, which is not JSON"),
        ({"metadata": {"seen": {"a", "b"}}}, "metadata.seen", "holds set, which is not JSON"),
        ({"metadata": {"top_p": math.inf}}, "metadata.top_p", "inf is not a JSON number"),
        ({"metadata": {"a": {3: "x"}}}, "metadata.a", "holds a key of type int, not a string"),
    ],
)
def test_langfuse_quarantines_a_poison_observation_by_name(poison, field, why):
    api = FakeApi([[obs(1), {**obs(2), **poison}, obs(3)]], [[score(1), score(3)]])
    batch = masked(LangfuseTraceSource(TraceSettings(), api=api)).fetch(None, 10)
    assert [t.id for t in batch.traces] == ["o1", "o3"]
    assert [a.trace_id for a in batch.annotations] == ["t1", "t3"]
    assert [(s.file, s.line, s.field, s.reason) for s in batch.skipped] == [
        ("langfuse:observations", 2, field, f"id o2: {why}")
    ]


def test_langfuse_quarantines_a_nan_score_where_a_number_is_expected():
    nan = {**score(2), "dataType": "NUMERIC", "value": math.nan}
    api = FakeApi([[obs(1), obs(2)]], [[score(1), nan]])
    batch = masked(LangfuseTraceSource(TraceSettings(), api=api)).fetch(None, 10)
    assert [a.id for a in batch.annotations] == ["s1"]
    assert [(s.file, s.field, s.reason) for s in batch.skipped] == [
        ("langfuse:scores", "value", "id s2: nan is not a JSON number")
    ]


def test_an_observation_with_every_field_the_api_sends_is_read():
    full = {
        **obs(1),
        "level": "DEFAULT",
        "endTime": "2025-03-01T10:00:02Z",
        "createdAt": "2025-03-01T10:00:03Z",
        "usageDetails": {"input": 12, "output": 3},
        "costDetails": {"total": 0.0001},
        "latency": 1.5,
        "modelParameters": {"temperature": 0.2, "stop": ["\n"]},
        "metadata": {"prompt_variables": {"city": "Paris"}},
    }
    api = FakeApi([[full]], [[score(1)]])
    batch = masked(LangfuseTraceSource(TraceSettings(), api=api)).fetch(None, 10)
    assert [t.id for t in batch.traces] == ["o1"] and batch.skipped == []
