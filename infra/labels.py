"""The label store: every human label the flywheel has read, kept in the state folder so
that the judge learns from all labels to date, not only those on tonight's traces.

One label per annotation (its score id), trace and name: an edit of it (a newer update
time, or the same time and another value or comment) replaces it, a read of it unchanged
changes nothing, and two people's labels on one trace are both kept, for the night to
reconcile (`flows.night.collect`). Each label is kept with the trace it is on, so an old
trace never has to be fetched again.
The store also keeps, per score name, the watermark of the last successful night: the
newest label timestamp the source gave (its clock, not this host's). Labels are read
again from an overlap before it, since a source can list a label after a later one, and
all of them again once a while (the watermark's stamp at the last full read is kept too),
for the labels stamped before the watermark that reach the source later still.
It keeps too which traces active learning asked about, so a night can count the
requests people answered. sqlite: one file, no server, atomic.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Iterable
from contextlib import closing
from datetime import datetime, timedelta
from pathlib import Path

from infra.traces.types import Annotation, TraceRecord

LABELS = """
create table if not exists labels (
    trace_id text not null, name text not null, annotation_id text not null,
    stamp text not null, annotation text not null, trace text not null,
    primary key (trace_id, name, annotation_id))"""
SCHEMA = f"""
{LABELS};
create table if not exists watermarks (name text primary key, stamp text not null);
create table if not exists full_reads (name text primary key, stamp text not null);
create table if not exists requested (trace_id text primary key, stamp text not null);
"""


class LabelStore:
    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        with closing(self._db()) as db:
            _migrate_one_label_per_trace(db)
            db.executescript(SCHEMA)

    def _db(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path)

    def add(self, annotations: Iterable[Annotation], traces: Iterable[TraceRecord]) -> int:
        """Keep each annotation whose trace is given or already stored; returns how many
        were new or edited."""
        by_trace = {t.trace_id: t for t in traces}
        changed = 0
        with closing(self._db()) as db, db:
            for label in annotations:
                given = by_trace.get(label.trace_id)
                trace = _dump(given) if given else _stored_trace(db, label.trace_id)
                if trace is None:
                    continue
                row = db.execute(
                    "select annotation from labels where trace_id = ? and name = ? "
                    "and annotation_id = ?",
                    (label.trace_id, label.name, label.id),
                ).fetchone()
                stored = _load(Annotation, row[0]) if row else None
                if stored is not None and (stored == label or _edited(stored) > _edited(label)):
                    continue  # read again unchanged, or an older read of a later edit
                db.execute(
                    "insert or replace into labels values (?, ?, ?, ?, ?, ?)",
                    (
                        label.trace_id,
                        label.name,
                        label.id,
                        label.timestamp.isoformat(),
                        _dump(label),
                        trace,
                    ),
                )
                changed += 1
        return changed

    def trace_ids(self) -> set[str]:
        """The traces the store holds a label on: they need not be fetched again."""
        with closing(self._db()) as db:
            return {row[0] for row in db.execute("select distinct trace_id from labels")}

    def labels(
        self, name: str, since: datetime | None = None
    ) -> list[tuple[Annotation, TraceRecord]]:
        """Every stored label named `name` (made at or after `since`), oldest first."""
        with closing(self._db()) as db:
            rows = db.execute(
                "select annotation, trace from labels where name = ?", (name,)
            ).fetchall()
        found = [(_load(Annotation, a), _load(TraceRecord, t)) for a, t in rows]
        found = [(a, t) for a, t in found if since is None or a.timestamp >= since]
        return sorted(found, key=lambda pair: (pair[0].timestamp, pair[0].trace_id))

    def watermark(self, name: str) -> datetime | None:
        """The newest timestamp of the labels named `name` that a successful night read."""
        return self._stamp("watermarks", name)

    def _stamp(self, table: str, name: str) -> datetime | None:
        with closing(self._db()) as db:
            row = db.execute(f"select stamp from {table} where name = ?", (name,)).fetchone()
        return datetime.fromisoformat(row[0]) if row else None

    def read_from(
        self, name: str, overlap: timedelta, full_every: timedelta | None = None
    ) -> datetime | None:
        """Where tonight's read of the labels named `name` starts: `overlap` before the
        watermark, for the labels a source listed late or people edited; None (all of
        them) on the first night, and once the watermark has moved `full_every` past the
        last full read: a label stamped days before the watermark (a backfill, an import,
        a sync that lagged) is out of the overlap's reach, and only a full read finds it."""
        mark = self.watermark(name)
        if mark is None:
            return None
        last_full = self._stamp("full_reads", name)
        if full_every is not None and (last_full is None or mark - last_full >= full_every):
            return None
        return mark - overlap

    def advance_watermark(self, name: str, moment: datetime, full_read: bool = False) -> None:
        """Move the watermark to `moment`, never back: a night that read only older labels
        (the overlap) must not widen the next night's read. `full_read`: tonight read every
        label, so the next full read is due `full_every` after `moment`."""
        mark = self.watermark(name)
        with closing(self._db()) as db, db:
            if mark is None or moment > mark:
                db.execute(
                    "insert or replace into watermarks values (?, ?)", (name, moment.isoformat())
                )
            if full_read:
                db.execute(
                    "insert or replace into full_reads values (?, ?)", (name, moment.isoformat())
                )

    def mark_requested(self, trace_ids: Iterable[str], moment: datetime) -> None:
        with closing(self._db()) as db, db:
            db.executemany(
                "insert or ignore into requested values (?, ?)",
                [(t, moment.isoformat()) for t in trace_ids],
            )

    def requested(self) -> set[str]:
        """Every trace active learning ever asked people to label."""
        with closing(self._db()) as db:
            return {row[0] for row in db.execute("select trace_id from requested")}


def _migrate_one_label_per_trace(db: sqlite3.Connection) -> None:
    """Stores made before labels were kept per annotation held one per trace: key each
    row by the annotation it holds, in one transaction (a crash keeps the old table)."""
    columns = [row[1] for row in db.execute("pragma table_info(labels)")]
    if not columns or "annotation_id" in columns:
        return
    db.execute("begin")  # the table changes below are part of it too
    db.execute("alter table labels rename to labels_one_per_trace")
    db.execute(LABELS)
    db.execute(
        "insert into labels select trace_id, name, json_extract(annotation, '$.id'), stamp, "
        "annotation, trace from labels_one_per_trace"
    )
    db.execute("drop table labels_one_per_trace")
    db.commit()


def _stored_trace(db: sqlite3.Connection, trace_id: str) -> str | None:
    row = db.execute("select trace from labels where trace_id = ? limit 1", (trace_id,)).fetchone()
    return row[0] if row else None


def _edited(label: Annotation) -> datetime:
    """When the label was last made or edited, as its source says."""
    return label.updated_at or label.timestamp


def _dump(record: Annotation | TraceRecord) -> str:
    return json.dumps(dataclasses.asdict(record), default=_stamp, sort_keys=True)


def _stamp(value: object) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"cannot store {type(value).__name__}")


def _load(cls: type, text: str):
    fields = json.loads(text)
    for key in ("timestamp", "start_time", "updated_at"):
        if key in fields and fields[key] is not None:
            fields[key] = datetime.fromisoformat(fields[key])
    if "tags" in fields:
        fields["tags"] = tuple(fields["tags"])
    if fields.get("conversation"):  # a session's turn keeps the conversation before it
        fields["conversation"] = tuple(tuple(turn) for turn in fields["conversation"])
    if "steps" in fields:  # a multi-step trace keeps its steps
        fields["steps"] = tuple(_load(cls, json.dumps(step)) for step in fields["steps"])
    return cls(**fields)
