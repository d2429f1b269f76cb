"""No label is lost: one the source lists after a later one, or one people edit, is read
by the next night exactly once, through the overlap before the watermark; the watermark
is the source's newest label time, not this host's clock."""

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from flows.night.runtime import Runtime
from flows.nightly import collect_traces
from infra.labels import LabelStore
from infra.settings import Settings
from infra.traces.mapping import annotation_from_score
from tests.fakes import ScriptedLM
from tests.infra.test_labels import export, label, trace

NOW = datetime.now(UTC)
LABELLED = NOW - timedelta(hours=1)  # the first night's label, as the source stamped it


def night(tmp_path, labels, **traces_settings) -> tuple[Runtime, list]:
    traces = [trace(f"t{i}", NOW - timedelta(hours=2)) for i in range(3)]
    export(tmp_path / "export", traces, labels)
    settings = Settings(
        state_dir=tmp_path / "state",
        traces={"jsonl_dir": str(tmp_path / "export"), "lookback_hours": 24} | traces_settings,
    )
    return Runtime(settings, lm=ScriptedLM()), traces


async def succeed(rt: Runtime, run_id: str):
    """A night whose end is reached: the watermark moves as `nightly` moves it."""
    collected = await collect_traces.fn(rt, run_id)
    if collected.labels_read_to is not None:
        rt.labels.advance_watermark(
            "correct", collected.labels_read_to, full_read=collected.labels_read_all
        )
    return collected


async def test_a_label_listed_late_is_read_the_next_night_exactly_once(tmp_path):
    first = [label("t0", 1.0, LABELLED)]
    rt, traces = night(tmp_path, first)
    night1 = await succeed(rt, "n1")
    assert night1.labels_new == 1
    assert rt.labels.watermark("correct") == LABELLED  # the source's time, not the host's

    # stamped before the watermark, listed by the source only after night 1 read
    late = label("t1", 0.0, LABELLED - timedelta(minutes=5))
    export(tmp_path / "export", traces, [*first, late])
    night2 = await succeed(rt, "n2")
    assert night2.labels_new == 1
    night3 = await succeed(rt, "n3")
    assert night3.labels_new == 0  # the overlap read again, nothing new
    stored = [(a.id, a.value) for a, _ in rt.labels.labels("correct")]
    assert stored == [(late.id, 0.0), (first[0].id, 1.0)]  # each once, oldest first
    assert rt.labels.watermark("correct") == LABELLED


async def test_a_label_stamped_days_before_the_watermark_is_read_by_the_next_full_read(
    tmp_path,
):
    first = [label("t0", 1.0, LABELLED - timedelta(days=3))]
    rt, traces = night(tmp_path, first, label_full_read_days=2)
    assert (await succeed(rt, "n1")).labels_read_all  # the first night reads every label
    # a backfill on a trace older than the night's window (a label on one of tonight's
    # traces comes with it): stamped two days before the watermark, beyond the overlap
    traces.append(trace("old", NOW - timedelta(days=10)))
    backfill = label("old", 0.0, LABELLED - timedelta(days=5))
    export(tmp_path / "export", traces, [*first, backfill])
    night2 = await succeed(rt, "n2")
    assert not night2.labels_read_all and night2.labels_new == 0  # out of the overlap's reach
    # two days of labels later (the source's clock), a night reads every label again
    fresh = label("t2", 1.0, LABELLED)
    export(tmp_path / "export", traces, [*first, backfill, fresh])
    night3 = await succeed(rt, "n3")
    assert not night3.labels_read_all and night3.labels_new == 1
    night4 = await succeed(rt, "n4")
    assert night4.labels_read_all and night4.labels_new == 1  # the backfill, once
    assert not (await succeed(rt, "n5")).labels_read_all  # the next one is due in 2 days
    stored = sorted(a.id for a, _ in rt.labels.labels("correct"))
    assert stored == sorted(a.id for a in (*first, backfill, fresh))


async def test_an_edited_annotation_replaces_its_stored_value(tmp_path):
    made = label("t0", 1.0, LABELLED)
    rt, traces = night(tmp_path, [made])
    await succeed(rt, "n1")
    # the UI edit keeps the timestamp; Langfuse moves updatedAt
    edited = replace(made, value=0.0, comment="wrong city", updated_at=NOW)
    export(tmp_path / "export", traces, [edited])
    night2 = await succeed(rt, "n2")
    assert night2.labels_new == 1
    ((kept, _),) = rt.labels.labels("correct")
    assert (kept.value, kept.comment) == (0.0, "wrong city")
    assert {i.id: i.human_pass for i in night2.items} == {"t0": False}


def test_an_edit_without_a_new_time_replaces_and_an_older_read_does_not(tmp_path):
    store = LabelStore(tmp_path / "labels.sqlite")
    made = label("a", 1.0)
    assert store.add([made], [trace("a")]) == 1
    assert store.add([made], []) == 0  # read again: nothing new, its trace already kept
    same_time = replace(made, comment="on second thought", value=0.0)
    assert store.add([same_time], []) == 1  # an export keeps no update time
    later = replace(made, value=1.0, updated_at=made.timestamp + timedelta(hours=3))
    assert store.add([later], []) == 1
    assert store.add([same_time], []) == 0  # an older read of the later edit
    ((kept, kept_trace),) = store.labels("correct")
    assert (kept.value, kept.updated_at, kept_trace) == (1.0, later.updated_at, trace("a"))


def test_langfuse_scores_give_their_update_time():
    score = {
        "id": "s1",
        "traceId": "t1",
        "name": "correct",
        "dataType": "BOOLEAN",
        "value": True,
        "source": "ANNOTATION",
        "timestamp": "2026-11-28T09:00:00Z",
        "updatedAt": "2026-11-29T10:30:00Z",
    }
    assert annotation_from_score(score).updated_at == datetime(2026, 11, 29, 10, 30, tzinfo=UTC)
    assert annotation_from_score({**score, "updatedAt": None}).updated_at is None
