from dataclasses import replace
from datetime import UTC, datetime

import pytest

from flows.night.collect import (
    LabelWindow,
    collect,
    hold_out,
    in_heldout_slice,
    load_heldout,
    one_record_per_trace,
    summarize,
    window_start,
)
from infra.agents.intent_router import IntentRouter
from infra.scales import ScoreScale
from infra.traces import Annotation, TraceBatch, TraceRecord
from infra.traces.types import Correction
from judges.scaled_metric import UnrankedScale, check_ranked

NOW = datetime(2026, 11, 29, tzinfo=UTC)


def trace(trace_id: str, text: str | None, reply: str) -> TraceRecord:
    messages = [{"role": "system", "content": "s"}] + (
        [{"role": "user", "content": text}] if text else []
    )
    return TraceRecord(
        id=f"o-{trace_id}", trace_id=trace_id, start_time=NOW, input=messages, output=reply
    )


def score(trace_id: str, value, name="correct", data_type="BOOLEAN") -> Annotation:
    return Annotation(
        id=f"s-{trace_id}",
        trace_id=trace_id,
        name=name,
        value=value,
        data_type=data_type,
        source="ANNOTATION",
        timestamp=NOW,
        comment="expected weather",
    )


def test_collect_pairs_annotations_with_traces_and_counts_skips():
    batch = TraceBatch(
        traces=[trace("a", "rain?", "weather"), trace("b", "jazz", "music"), trace("c", None, "x")],
        annotations=[
            score("a", 1.0),
            score("b", 0.0),
            score("c", 1.0),
            score("a", 3.0, name="other"),
            score("b", "good", data_type="CATEGORICAL"),
        ],
    )
    collected = collect(batch, IntentRouter(), "correct")
    assert [e.id for e in collected.examples] == ["a", "b"]
    assert [(i.id, i.human_pass) for i in collected.items] == [("a", True), ("b", False)]
    assert collected.items[0].input_text == "rain?" and collected.items[0].output_text == "weather"
    reasons = [(s.field, s.reason) for s in collected.skipped]
    assert any(field == "input" and "trace c" in reason for field, reason in reasons)
    assert any(field == "value" for field, _ in reasons)  # the categorical score
    assert summarize(collected) == {
        "traces": 2,
        "annotations": 2,
        "annotations_new": 0,  # counted by the night against its label store
        "annotations_answered": 0,
        "annotations_conflicting": 0,
        "annotations_outside_window": 0,
        "corrections": 0,
        "corrections_written": 0,
        "annotations_pass": 1,
        "skipped_records": 2,
        "not_replayable": 0,
    }


def test_heldout_file_skips_bad_lines(tmp_path):
    path = tmp_path / "heldout.jsonl"
    deep = '{"id": 3, "inputs": {"request": %s}}' % ("[" * 600 + "]" * 600)
    deeper = '{"id": 4, "inputs": %s}' % ("[" * 10_000 + "]" * 10_000)
    path.write_text(
        '{"id": 1, "inputs": {"request": "x"}, "reference": "GetWeather"}\nnot json\n{"id": 2}\n'
        f"{deep}\n{deeper}\n"
    )
    examples = load_heldout(path)
    assert [(e.id, e.reference) for e in examples] == [("1", "GetWeather")]
    assert load_heldout(tmp_path / "missing.jsonl") == []


def test_trace_window_follows_lookback():
    assert window_start(None) is None
    assert window_start(24, now=NOW) == datetime(2026, 11, 28, tzinfo=UTC)


def test_collect_keeps_replies_and_the_label_window():
    later = datetime(2026, 11, 29, 18, tzinfo=UTC)
    batch = TraceBatch(
        traces=[trace("a", "rain?", "weather"), trace("b", "jazz", "music")],
        annotations=[score("a", 1.0), Annotation(**{**vars(score("a", 0.0)), "timestamp": later})],
    )
    fetched = datetime(2026, 11, 30, 2, tzinfo=UTC)
    collected = collect(batch, IntentRouter(), "correct", since=NOW, fetched_at=fetched)
    assert collected.window == LabelWindow(1, later, later, NOW, fetched)  # the later edit wins
    assert [(i.id, i.human_pass) for i in collected.items] == [("a", False)]
    judged = collected.judged_items()
    assert [(i.id, i.input_text, i.output_text, i.human_pass) for i in judged] == [
        ("a", "rain?", "weather", None),
        ("b", "jazz", "music", None),
    ]


def night(*annotations: Annotation) -> TraceBatch:
    traces = [trace(t, f"request {t}", f"reply {t}") for t in "abcd"]
    return TraceBatch(traces=traces, annotations=list(annotations))


def test_a_numeric_score_config_gives_numbers_and_skips_what_is_off_its_range():
    stars = ScoreScale("numeric", minimum=1, maximum=5, name="quality")
    batch = night(
        score("a", 4.0, "quality", "NUMERIC"),
        score("b", 0.7, "quality", "NUMERIC"),  # pass/fail used to read this as a pass
        score("c", 1.0, "quality", "BOOLEAN"),
        score("d", 5.0, "quality", "NUMERIC"),
    )
    collected = collect(batch, IntentRouter(), "quality", scale=stars)
    assert collected.scale is stars
    assert [(i.id, i.human_value, i.human_pass) for i in collected.items] == [
        ("a", 4.0, None),
        ("d", 5.0, None),
    ]
    assert [(s.field, s.reason) for s in collected.skipped] == [
        ("value", "score s-b: 0.7 (NUMERIC) is not on the numeric 1 to 5 scale of 'quality'"),
        ("value", "score s-c: 1.0 (BOOLEAN) is not on the numeric 1 to 5 scale of 'quality'"),
    ]
    counts = summarize(collected)
    assert (counts["traces"], counts["annotations"], counts["skipped_records"]) == (4, 2, 2)
    assert "annotations_pass" not in counts  # not a pass/fail score


def test_a_categorical_score_config_gives_its_labels():
    tone = ScoreScale("categorical", ("rude", "polite"), (0, 1), ordinal=True, name="tone")
    batch = night(
        score("a", "polite", "tone", "CATEGORICAL"),
        score("b", "rude", "tone", "CATEGORICAL"),
        score("c", "sarcastic", "tone", "CATEGORICAL"),
    )
    collected = collect(batch, IntentRouter(), "tone", scale=tone)
    assert collected.scale.categories == ("rude", "polite") and collected.scale.ordinal
    assert [(i.id, i.human_value) for i in collected.items] == [("a", "polite"), ("b", "rude")]
    assert [(s.field, s.reason.split(":")[0]) for s in collected.skipped] == [
        ("value", "score s-c")
    ]


def test_without_a_config_the_scale_is_inferred_from_the_annotations():
    numeric = night(score("a", 2.0, "stars", "NUMERIC"), score("b", 4.0, "stars", "NUMERIC"))
    collected = collect(numeric, IntentRouter(), "stars")
    assert collected.scale == ScoreScale("numeric", minimum=2, maximum=4, name="stars")
    boolean = collect(night(score("a", 1.0), score("b", 0.0)), IntentRouter(), "correct")
    assert boolean.scale.kind == "boolean"
    assert [(i.human_pass, i.human_value) for i in boolean.items] == [(True, True), (False, False)]
    nothing = collect(night(), IntentRouter(), "correct")
    assert nothing.scale.kind == "boolean" and nothing.items == []


def test_a_scale_without_order_stops_the_night_with_the_fix():
    batch = night(score("a", "blue", "colour", "CATEGORICAL"))
    same = ScoreScale("categorical", ("blue", "red"), (0, 0), name="colour")
    flat = collect(batch, IntentRouter(), "colour", scale=same).scale
    with pytest.raises(UnrankedScale, match=r"^The score 'colour' has categories .*judge\.ordinal"):
        check_ranked(flat)
    ranked = replace(same, ordinal=True)
    check_ranked(collect(batch, IntentRouter(), "colour", scale=ranked).scale)
    unbounded = ScoreScale("numeric", minimum=1, name="stars")
    with pytest.raises(UnrankedScale, match="'stars' is numeric without a range.*maximum"):
        check_ranked(collect(night(), IntentRouter(), "stars", scale=unbounded).scale)
    check_ranked(collect(night(), IntentRouter(), "correct").scale)  # pass/fail ranks replies


def test_a_trace_too_long_for_any_model_is_quarantined_by_name():
    huge = "x" * 5_000_000  # a 5 MB body: it would fail its batch, every night
    batch = TraceBatch(
        traces=[
            trace("fine", "rain?", "weather"),
            trace("big-in", huge, "weather"),
            trace("big-out", "rain?", huge),
        ],
        annotations=[score("fine", 1.0), score("big-in", 0.0), score("big-out", 1.0)],
    )
    collected = collect(batch, IntentRouter(), "correct", max_text_chars=20_000)
    assert [e.id for e in collected.examples] == ["fine"]
    assert [i.id for i in collected.items] == ["fine"]
    reasons = {(s.field, s.reason.split(":")[0]) for s in collected.skipped}
    assert reasons == {("input", "trace big-in"), ("output", "trace big-out")}
    assert all("max_text_chars" in s.reason for s in collected.skipped)
    # without a limit they are read, as before
    assert len(collect(batch, IntentRouter(), "correct").examples) == 3


def test_peoples_labels_on_one_trace_are_reconciled_or_the_trace_left_out_by_name():
    def by(person: str, trace_id: str, value, data_type="BOOLEAN") -> Annotation:
        return replace(score(trace_id, value, data_type=data_type), id=f"s-{trace_id}-{person}")

    traces = [trace(t, "rain?", "weather") for t in ("agree", "split", "edited")]
    edit = replace(by("ann", "edited", 0.0), timestamp=NOW.replace(hour=5))
    batch = TraceBatch(
        traces=traces,
        annotations=[
            by("ann", "agree", 1.0),
            by("bob", "agree", 1.0),
            by("ann", "split", 1.0),
            by("bob", "split", 0.0),
            by("ann", "edited", 1.0),
            edit,  # the same person changed their mind: no conflict, the edit wins
        ],
    )
    collected = collect(batch, IntentRouter(), "correct")
    assert {(i.id, i.human_pass) for i in collected.items} == {("agree", True), ("edited", False)}
    assert collected.labels_conflicting == 1
    assert summarize(collected)["annotations_conflicting"] == 1
    (skip,) = collected.skipped
    assert (
        "trace split" in skip.reason and "s-split-ann" in skip.reason and "disagree" in skip.reason
    )

    stars = ScoreScale("numeric", minimum=1, maximum=5, name="correct")
    numeric = TraceBatch(
        traces=traces[:1],
        annotations=[by("ann", "agree", 4.0, "NUMERIC"), by("bob", "agree", 5.0, "NUMERIC")],
    )
    (item,) = collect(numeric, IntentRouter(), "correct", scale=stars).items
    assert item.human_value == 4.5  # a numeric scale takes their mean


def test_a_trace_of_several_generations_is_read_as_its_last_carrying_every_step():
    first = trace("t", "rain?", "weather")
    later = replace(
        trace("t", "and tomorrow?", "weather"), id="o-t-2", start_time=NOW.replace(hour=3)
    )
    for order in ([first, later], [later, first]):  # whatever order the source lists them
        collected = collect(
            TraceBatch(traces=order, annotations=[score("t", 1.0)]), IntentRouter(), "correct"
        )
        (example,) = collected.examples
        assert example.inputs["request"] == "and tomorrow?"  # the latest: the one judged
        assert collected.skipped == []
        (record,) = one_record_per_trace(order, [])
        assert [step.id for step in record.steps] == ["o-t", "o-t-2"]  # in recorded order


def test_replies_people_judged_or_corrected_become_scored_replies():
    batch = night(score("a", 1.0), score("b", 0.0))
    batch.corrections = [
        Correction("c-old", "b", "GetWeather", NOW.replace(hour=1)),
        Correction("c2", "b", "PlayMusic", NOW.replace(hour=2)),  # the latest wins
        Correction("c9", "z", "not tonight's", NOW),
    ]
    collected = collect(batch, IntentRouter(), "correct")
    assert collected.corrections == {"b": "PlayMusic"}
    replies = collected.human_replies()
    assert replies == {
        "a": [("reply a", 1.0)],  # passed as logged
        # corrected: the correction is the chosen reply, the logged one the rejected
        "b": [("PlayMusic", 1.0), ("reply b", 0.0)],
    }
    assert summarize(collected)["corrections"] == 1


def test_a_correction_the_teacher_wrote_counts_where_people_wrote_none():
    batch = night(score("a", 0.0), score("b", 0.0))
    batch.corrections = [Correction("c1", "b", "PlayMusic", NOW)]
    collected = collect(batch, IntentRouter(), "correct")
    assert collected.chats["a"] == [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "request a"},
    ]
    written = replace(collected, written={"a": "weather", "b": "the teacher's guess"})
    assert written.human_replies() == {
        "a": [("weather", 1.0), ("reply a", 0.0)],
        "b": [("PlayMusic", 1.0), ("reply b", 0.0)],  # the person's correction wins
    }
    assert summarize(written)["corrections_written"] == 2


def test_held_out_traces_leave_their_chats_behind():
    collected = collect(night(score("a", 0.0)), IntentRouter(), "correct")
    held = {t for t in "abcd" if in_heldout_slice(t, 0.5)}
    assert held and held != set("abcd")  # the share splits these four ids
    kept = hold_out(collected, 0.5)
    assert set(kept.chats) == set("abcd") - held
