"""Traces from a JSONL export: `observations.jsonl` and `scores.jsonl` in one folder,
and optionally `score_configs.jsonl` (Langfuse's `GET /api/public/score-configs` items).

Each line is one record in Langfuse's own shape (see `infra.traces.mapping`). A bad
observation or score line is skipped, logged with its file, line number and field, and
counted in the batch, so one broken record never costs the rest of the night. A bad
score config line stops the night instead: the config decides how every annotation is
read. Label requests, judge scores and held-out runs go to an outbox folder
(`infra.traces.outbox`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Collection, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from infra.redaction import mask
from infra.scales import ScoreScale
from infra.traces.errors import RecordError
from infra.traces.feedback import JudgeScore, LabelRequest
from infra.traces.heldout_runs import HeldoutItem, HeldoutRun, SentRuns
from infra.traces.mapping import score_from_langfuse, trace_from_observation
from infra.traces.outbox import Outbox
from infra.traces.score_scale import scale_in_force
from infra.traces.sessions import on_last_traces
from infra.traces.source import SkippedRecord, TraceBatch, TraceSourceError, as_utc
from infra.traces.types import Annotation, Correction
from infra.types import Example

log = logging.getLogger(__name__)

OBSERVATIONS = "observations.jsonl"
SCORES = "scores.jsonl"
SCORE_CONFIGS = "score_configs.jsonl"
HELDOUT = "heldout.jsonl"  # {"id", "inputs", "reference"} per line: requests with true labels
DEMO_DIR = Path(__file__).parent / "demo_data"

T = TypeVar("T")


class JsonlTraceSource:
    def __init__(self, directory: str | Path = "", outbox_dir: str | Path | None = None):
        self.directory = Path(directory) if directory else DEMO_DIR
        self.outbox = Outbox(outbox_dir) if outbox_dir else None

    def request_labels(self, items: list[LabelRequest]) -> int:
        return self._outbox().request_labels(items)

    def write_scores(self, scores: list[JudgeScore]) -> int:
        return self._outbox().write_scores(scores)

    def send_heldout_runs(
        self, dataset: str, items: list[HeldoutItem], runs: list[HeldoutRun], at: datetime
    ) -> SentRuns:
        return self._outbox().send_heldout_runs(dataset, items, runs, at)

    def pending_label_requests(self) -> set[str]:
        # the outbox cannot tell a done request from a pending one; a done one has a human
        # label by then, which keeps it out of the selection anyway
        return self.outbox.requested_traces() if self.outbox else set()

    def score_scale(self, name: str, *, ordinal: bool = False) -> ScoreScale | None:
        """The scale of the export's config named `name`, chosen as from Langfuse; None
        without one."""
        path = self.directory / SCORE_CONFIGS
        if not path.is_file():
            return None
        found = [c for c in _configs(path) if c["name"] == name]
        return scale_in_force(name, found, ordinal=ordinal)

    def _outbox(self) -> Outbox:
        if self.outbox is None:
            raise TraceSourceError(
                "This JSONL trace source has no outbox folder for label requests and scores: "
                "build it with make_trace_source, or pass outbox_dir."
            )
        return self.outbox

    def fetch(self, since: datetime | None = None, limit: int = 1000) -> TraceBatch:
        since = as_utc(since)
        batch = TraceBatch()
        traces = [
            t
            for t in _records(self._observations(), trace_from_observation, batch.skipped)
            if since is None or t.start_time >= since
        ]
        # The most recent `limit`, oldest first, as the Langfuse source returns them.
        batch.traces = sorted(traces, key=lambda t: t.start_time)[-limit:] if limit else []

        scores = self.directory / SCORES
        if not scores.is_file():
            log.info("%s has no %s: no annotations", self.directory, SCORES)
            return batch
        kept = {t.trace_id for t in batch.traces}
        sessions = {t.session_id for t in batch.traces if t.session_id}
        for score in _records(scores, score_from_langfuse, batch.skipped):
            if isinstance(score, Annotation) and not score.trace_id:
                if score.session_id not in sessions:
                    continue  # a session's score, on a session out of the window
            elif score.trace_id not in kept:
                continue
            if isinstance(score, Correction):
                batch.corrections.append(score)
            else:
                (batch.annotations if score.is_human else batch.other_scores).append(score)
        batch.annotations = on_last_traces(batch.annotations, batch.traces, batch.skipped)
        batch.other_scores = on_last_traces(batch.other_scores, batch.traces, batch.skipped)
        return batch

    def dataset_examples(self, name: str) -> list[Example]:
        raise TraceSourceError(
            f"A JSONL export has no datasets (eval.dataset = {name!r}): set eval.heldout_path "
            "to a JSONL of held-out examples instead."
        )

    def heldout_file(self) -> Path | None:
        path = self.directory / HELDOUT
        return path if path.is_file() else None

    def fetch_labels(
        self, name: str, since: datetime | None, have: Collection[str] = ()
    ) -> TraceBatch:
        since = as_utc(since)
        batch = TraceBatch()
        scores = self.directory / SCORES
        if scores.is_file():
            batch.annotations = [
                a
                for a in _records(scores, score_from_langfuse, batch.skipped)
                if isinstance(a, Annotation)
                and a.is_human
                and a.name == name
                and (since is None or a.timestamp >= since)
            ]
        wanted = {a.trace_id for a in batch.annotations if a.trace_id} - set(have)
        # a session's score: its session's traces, to find its last one and the talk before
        sessions = {a.session_id for a in batch.annotations if not a.trace_id}
        if not wanted and not sessions:  # the usual night: its labels are on its own traces
            return batch
        batch.traces = [
            t
            for t in _records(self._observations(), trace_from_observation, batch.skipped)
            if t.trace_id in wanted or (t.session_id and t.session_id in sessions)
        ]
        batch.annotations = on_last_traces(batch.annotations, batch.traces, batch.skipped)
        return batch

    def _observations(self) -> Path:
        path = self.directory / OBSERVATIONS
        if not path.is_file():
            raise TraceSourceError(
                f"No {OBSERVATIONS} in {self.directory}: point FLYWHEEL_TRACES__JSONL_DIR at a "
                "folder holding a Langfuse export, or leave it empty for the bundled demo."
            )
        return path


MAX_RECORD_BYTES = 1 << 20  # one trace record: far past any prompt a model could take
LIMIT = "1 MiB"


def _configs(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                config = json.loads(line)
            except json.JSONDecodeError as e:
                raise TraceSourceError(f"{path}:{number}: not valid JSON ({e.msg})") from e
            if not isinstance(config, dict) or not isinstance(config.get("name"), str):
                raise TraceSourceError(f"{path}:{number}: field name: a score config needs one")
            yield config


def _records(path: Path, mapper: Callable[[dict], T], skipped: list[SkippedRecord]) -> Iterator[T]:
    """Each line mapped, or skipped with the reason: bad JSON, bad bytes, a record too
    big, too deeply nested or holding what no JSON value is (`record_shape`)."""
    with path.open("rb") as lines:
        for number, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            if len(raw) > MAX_RECORD_BYTES:
                size = f"{len(raw) / 2**20:.1f} MiB"
                _skip(skipped, path, number, "<record>", f"{size} is past the {LIMIT} limit")
                continue
            try:
                record = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError as e:
                reason = f"not UTF-8 (byte 0x{raw[e.start]:02x} at column {e.start + 1})"
                _skip(skipped, path, number, "<encoding>", reason)
                continue
            except json.JSONDecodeError as e:
                _skip(skipped, path, number, "<json>", f"not valid JSON ({e.msg})")
                continue
            except RecursionError:
                _skip(skipped, path, number, "<json>", "nested too deeply to read")
                continue
            except ValueError:  # an integer of more digits than Python converts
                _skip(skipped, path, number, "<json>", "holds a number too long to read")
                continue
            try:
                mapped = mapper(record)
            except RecordError as e:
                _skip(skipped, path, number, e.field, f"{_named(record)}{e.message}")
                continue
            yield mapped


def _named(record: Any) -> str:
    """ "id <id>: " for a record that has one, so a skipped line names its record too."""
    record_id = record.get("id") if isinstance(record, dict) else None
    return f"id {record_id}: " if isinstance(record_id, str) and record_id else ""


def _skip(skipped: list[SkippedRecord], path: Path, line: int, field: str, reason: str) -> None:
    # logged before the batch reaches the masking source, so masked here too
    log.warning("%s:%d: skipped, field %s: %s", path, line, field, mask(reason))
    skipped.append(SkippedRecord(str(path), line, field, reason))
