"""A week of production traffic for the week of nights (`benchmarks.week`, and its test),
written day by day as a Langfuse export would hold it (issue 57).

The demo export is cut into days on a timeline that ends at the test's start: day `d`'s
traffic is stamped `7 - d` days and 12 hours before it, its labels two hours later. A
night `d` reads the traces of its own day only (`lookback_hours`, `window_hours`) and the
labels the source holds by then, so seven nights run in minutes, each on another day.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from infra.traces.jsonl import DEMO_DIR

DAYS = 7
TRAFFIC = {1: 60, 2: 0, 3: 30, 4: 24, 5: 20, 6: 20, 7: 20}  # new traces per day
LABELLED = {1: 50, 3: 10, 5: 10, 6: 10, 7: 10}  # of them, labelled the same day


# what a stream has written, beside its start and how far into the demo it has read
_KEPT = ("observations", "scores", "edited", "drifted", "late")


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class WeekStream:
    """The export folder as it stands on each day, and what the test needs to check it."""

    folder: Path
    start: datetime = field(default_factory=lambda: datetime.now(UTC))
    observations: list[dict] = field(default_factory=list)
    scores: list[dict] = field(default_factory=list)
    edited: str = ""  # the score id people edited on day 3
    drifted: list[str] = field(default_factory=list)  # traces labelled against the judge
    late: list[str] = field(default_factory=list)  # score ids that arrived on day 7, stamped day 2

    def __post_init__(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._demo = [json.loads(line) for line in (DEMO_DIR / "observations.jsonl").open()]
        demo_scores = [json.loads(line) for line in (DEMO_DIR / "scores.jsonl").open()]
        self._labels = {s["traceId"]: s for s in demo_scores if s["dataType"] == "BOOLEAN"}
        # labelled demo traces first, so each day's labelled share exists
        self._demo.sort(key=lambda o: o["traceId"] not in self._labels)
        self._next = 0
        heldout = (DEMO_DIR / "heldout.jsonl").read_text().splitlines()[:12]
        (self.folder / "heldout.jsonl").write_text("\n".join(heldout) + "\n")

    def state(self) -> dict:
        """What the stream has written so far, for a week continued later (`restore`)."""
        kept = {key: getattr(self, key) for key in _KEPT}
        return {"start": self.start.isoformat(), "next": self._next, **kept}

    @classmethod
    def restore(cls, folder: Path, state: dict) -> WeekStream:
        stream = cls(folder, datetime.fromisoformat(state["start"]))
        for key in _KEPT:
            setattr(stream, key, state[key])
        stream._next = state["next"]
        stream._write()
        return stream

    def day_start(self, day: int) -> datetime:
        return self.start - timedelta(days=DAYS - day, hours=12)

    def window_hours(self, day: int) -> int:
        """A lookback that reaches back to day `day`'s start, and not to the day before."""
        now = datetime.now(UTC)
        return int((now - self.day_start(day)).total_seconds() // 3600) + 3

    def traces_of(self, day: int) -> list[str]:
        begin, end = self.day_start(day), self.day_start(day) + timedelta(hours=12)
        return [o["traceId"] for o in self.observations if begin <= _moment(o) < end]

    def labelled(self) -> set[str]:
        return {s["traceId"] for s in self.scores}

    def add_day(self, day: int) -> None:
        """Day `day`'s traffic and its labels (the twists of days 3 and 7 apart)."""
        start = self.day_start(day)
        new = self._demo[self._next : self._next + TRAFFIC[day]]
        self._next += TRAFFIC[day]
        labelled = [o for o in new if o["traceId"] in self._labels][: LABELLED.get(day, 0)]
        for n, row in enumerate(new):
            row = dict(row, startTime=_stamp(start + timedelta(minutes=n)))
            row["endTime"] = row["startTime"]
            self.observations.append(row)
        for n, row in enumerate(labelled):
            label = self._labels[row["traceId"]]
            self._label(label["traceId"], label["value"], start + timedelta(hours=2, minutes=n))
        self._write()

    def edit_a_label(self) -> None:
        """People change their mind on a label already read: Langfuse keeps its timestamp."""
        first = self.scores[0]
        first["value"] = 1.0 - first["value"]
        first["comment"] = "edited: " + (first.get("comment") or "")
        self.edited = first["id"]
        self._write()

    def drift(self, day: int, verdicts: dict[str, float]) -> None:
        """Labels on unlabelled traces of the day before that say the opposite of what the
        judge in use said of them (`verdicts`: trace id -> its score)."""
        stamp = self.day_start(day) + timedelta(hours=2)
        for n, (trace_id, value) in enumerate(sorted(verdicts.items())):
            self._label(trace_id, 1.0 - value, stamp + timedelta(minutes=n), "drift")
            self.drifted.append(trace_id)
        self._write()

    def late_labels(self, count: int) -> None:
        """Labels that reach the source on day 7, stamped on day 2 (a backfill, an import):
        days before the watermark, out of reach of the overlap."""
        unlabelled = [t for t in self.traces_of(1) if t not in self.labelled()][:count]
        stamp = self.day_start(2) + timedelta(hours=3)
        for n, trace_id in enumerate(unlabelled):
            self.late.append(self._label(trace_id, 1.0, stamp + timedelta(minutes=n), "late"))
        self._write()

    def _label(self, trace_id: str, value: float, at: datetime, kind: str = "") -> str:
        score_id = f"week-{kind or 'label'}-{trace_id}"
        self.scores.append(
            {
                "id": score_id,
                "traceId": trace_id,
                "observationId": f"obs-{trace_id[:18]}",
                "name": "correct",
                "value": float(value),
                "dataType": "BOOLEAN",
                "source": "ANNOTATION",
                "comment": kind or None,
                "timestamp": _stamp(at),
            }
        )
        return score_id

    def _write(self) -> None:
        for name, rows in (("observations", self.observations), ("scores", self.scores)):
            text = "".join(json.dumps(row) + "\n" for row in rows)
            (self.folder / f"{name}.jsonl").write_text(text)


def _moment(observation: dict) -> datetime:
    return datetime.fromisoformat(observation["startTime"].replace("Z", "+00:00"))
