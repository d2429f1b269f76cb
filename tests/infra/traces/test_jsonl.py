import json
import logging
from datetime import UTC, datetime

import pytest

from infra.errors import UserFacingError
from infra.scales import ScoreScale
from infra.traces.jsonl import JsonlTraceSource
from infra.traces.source import TraceSourceError


def obs(i: int, day: int = 1) -> dict:
    return {
        "id": f"o{i}",
        "traceId": f"t{i}",
        "name": "route",
        "startTime": f"2025-03-{day:02d}T10:00:00Z",
        "input": [{"role": "user", "content": f"question {i}"}],
        "output": "card_arrival",
    }


def score(i: int, source: str = "ANNOTATION") -> dict:
    return {
        "id": f"s{i}-{source}",
        "traceId": f"t{i}",
        "name": "correct",
        "value": 1,
        "stringValue": "True",
        "dataType": "BOOLEAN",
        "source": source,
        "timestamp": "2025-03-05T10:00:00Z",
    }


def write(path, lines) -> None:
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")


@pytest.fixture
def export(tmp_path):
    write(tmp_path / "observations.jsonl", [obs(1, day=1), obs(2, day=2), obs(3, day=3)])
    write(tmp_path / "scores.jsonl", [score(1), score(2), score(2, "EVAL"), score(9)])
    return tmp_path


def test_good_export(export):
    batch = JsonlTraceSource(export).fetch(since=None, limit=100)
    assert [t.id for t in batch.traces] == ["o1", "o2", "o3"]
    assert batch.traces[0].user_text == "question 1"
    # Human annotations and machine scores are kept apart; t9 is not a fetched trace.
    assert [a.id for a in batch.annotations] == ["s1-ANNOTATION", "s2-ANNOTATION"]
    assert [a.id for a in batch.other_scores] == ["s2-EVAL"]
    assert batch.skipped == []


def test_corrected_outputs_are_read_apart_from_scores(export):
    corrected = {**score(1), "id": "c1", "name": "output", "dataType": "CORRECTION"}
    corrected |= {"value": 0, "stringValue": "card_delivery"}
    blank = {**corrected, "id": "c2", "traceId": "t2", "stringValue": ""}
    lines = (export / "scores.jsonl").read_text().splitlines()
    write(export / "scores.jsonl", [*lines, corrected, blank])
    batch = JsonlTraceSource(export).fetch(since=None, limit=100)
    assert [(c.trace_id, c.text) for c in batch.corrections] == [("t1", "card_delivery")]
    assert [a.id for a in batch.annotations] == ["s1-ANNOTATION", "s2-ANNOTATION"]
    assert [(s.line, s.field) for s in batch.skipped] == [(6, "value")]  # the blank one


def test_since_and_limit_keep_the_most_recent(export):
    source = JsonlTraceSource(export)
    since = source.fetch(since=datetime(2025, 3, 2, tzinfo=UTC), limit=100)
    assert [t.id for t in since.traces] == ["o2", "o3"]
    assert [t.id for t in source.fetch(since=None, limit=2).traces] == ["o2", "o3"]
    assert [a.trace_id for a in source.fetch(since=None, limit=1).annotations] == []
    naive = source.fetch(since=datetime(2025, 3, 3), limit=100)  # naive is read as UTC
    assert [t.id for t in naive.traces] == ["o3"]


def test_malformed_lines_are_skipped_counted_and_logged(tmp_path, caplog):
    missing_trace = {k: v for k, v in obs(3).items() if k != "traceId"}
    write(
        tmp_path / "observations.jsonl",
        [obs(1), "{not json", "", missing_trace, {**obs(4), "promptVersion": "v2"}, obs(5)],
    )
    write(tmp_path / "scores.jsonl", [score(1), {**score(5), "value": "yes"}, "[1, 2"])
    with caplog.at_level(logging.WARNING, logger="infra.traces.jsonl"):
        batch = JsonlTraceSource(tmp_path).fetch(since=None, limit=100)

    assert [t.id for t in batch.traces] == ["o1", "o5"]
    assert [a.id for a in batch.annotations] == ["s1-ANNOTATION"]
    where = [(s.file.rsplit("/", 1)[-1], s.line, s.field) for s in batch.skipped]
    assert where == [
        ("observations.jsonl", 2, "<json>"),
        ("observations.jsonl", 4, "traceId"),
        ("observations.jsonl", 5, "promptVersion"),
        ("scores.jsonl", 2, "value"),
        ("scores.jsonl", 3, "<json>"),
    ]
    assert len(caplog.records) == 5
    assert "observations.jsonl:4" in caplog.text and "traceId" in caplog.text


def test_poison_lines_are_skipped_naming_line_and_why(tmp_path):
    huge = {**obs(2), "input": [{"role": "user", "content": "x" * (5 << 20)}]}  # 5 MiB
    deep = "[" * 100_000 + "]" * 100_000
    lines = [json.dumps(obs(1)), json.dumps(huge), deep, json.dumps(obs(4))]
    body = "\n".join(lines).encode() + b"\n"
    latin1 = json.dumps(obs(5)).replace("question 5", "caf\u00e9").encode("latin-1") + b"\n"
    (tmp_path / "observations.jsonl").write_bytes(body + latin1)
    (tmp_path / "scores.jsonl").write_text("")
    batch = JsonlTraceSource(tmp_path).fetch(since=None, limit=100)
    assert [t.id for t in batch.traces] == ["o1", "o4"]
    why = [(s.line, s.field, s.reason) for s in batch.skipped]
    assert why[0][:2] == (2, "<record>") and "5.0 MiB is past the 1 MiB limit" in why[0][2]
    assert why[1] == (3, "<json>", "nested too deeply to read")
    assert why[2][:2] == (5, "<encoding>") and "not UTF-8 (byte 0xe9" in why[2][2]


def test_missing_scores_file_means_no_annotations(tmp_path):
    write(tmp_path / "observations.jsonl", [obs(1)])
    batch = JsonlTraceSource(tmp_path).fetch(since=None, limit=10)
    assert len(batch.traces) == 1 and batch.annotations == []


def test_missing_export_says_how_to_fix(tmp_path):
    with pytest.raises(TraceSourceError, match="FLYWHEEL_TRACES__JSONL_DIR"):
        JsonlTraceSource(tmp_path / "nowhere").fetch(since=None, limit=10)


def test_an_export_without_score_configs_has_none(export):
    assert JsonlTraceSource(export).score_scale("correct") is None


def config(name: str, created: str, archived: bool = False, **fields) -> dict:
    return {
        "name": name,
        "dataType": "NUMERIC",
        "isArchived": archived,
        "createdAt": created,
    } | fields


def test_an_exported_score_config_is_picked_as_langfuse_would(export):
    labels = [{"label": "bad", "value": 0}, {"label": "good", "value": 1}]
    write(
        export / "score_configs.jsonl",
        [
            config("quality", "2026-11-02T00:00:00Z", archived=True),  # newer, but archived
            config("quality", "2026-10-01T00:00:00Z", dataType="CATEGORICAL", categories=labels),
            config("quality", "2026-09-01T00:00:00Z"),  # older
            "",
            config("speed", "2026-11-01T00:00:00Z", minValue=1, maxValue=5),
        ],
    )  # fmt: skip
    source = JsonlTraceSource(export)
    assert source.score_scale("quality") == ScoreScale(
        "categorical", ("bad", "good"), (0.0, 1.0), name="quality"
    )
    assert source.score_scale("quality", ordinal=True).levels == ("bad", "good")
    assert source.score_scale("speed") == ScoreScale("numeric", minimum=1, maximum=5, name="speed")
    assert source.score_scale("missing") is None


def test_a_score_config_that_is_no_scale_stops_the_night_naming_it(export):
    broken = config("tone", "2026-11-01T00:00:00Z", dataType="CATEGORICAL", categories=[])
    write(export / "score_configs.jsonl", [broken, config("speed", "2026-11-01T00:00:00Z")])
    source = JsonlTraceSource(export)
    with pytest.raises(
        UserFacingError,
        match=r"^The Langfuse score config 'tone' cannot be read "
        r"\(categories: .*\): fix it .*traces\.annotation_name",
    ):
        source.score_scale("tone")
    assert source.score_scale("speed") == ScoreScale("numeric", name="speed")  # others are fine


@pytest.mark.parametrize(
    ("line", "says"),
    [("{not json", r"score_configs.jsonl:2: not valid JSON"),
     ('{"dataType": "NUMERIC"}', r"score_configs.jsonl:2: field name")],
)  # fmt: skip
def test_a_broken_score_config_line_is_named_not_skipped(export, line, says):
    write(export / "score_configs.jsonl", [config("speed", "2026-11-01T00:00:00Z"), line])
    with pytest.raises(TraceSourceError, match=says):
        JsonlTraceSource(export).score_scale("speed")
