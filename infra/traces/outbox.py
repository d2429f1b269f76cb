"""The JSONL source's way back: label requests, judge scores and held-out runs appended
to files.

An offline deployment has no Langfuse to send them to, so they wait in an outbox
folder (never the export folder, which may be the demo data shipped in the package)
for a person or an importer. Lines are only ever appended: earlier nights stay, and a
night sent again appends its lines again, with the same ids, for an importer to keep once.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from infra.traces.feedback import JudgeScore, LabelRequest
from infra.traces.heldout_runs import SCORE_NAME, HeldoutItem, HeldoutRun, SentRuns
from infra.traces.mapping import score_to_langfuse
from infra.traces.source import TraceSourceError

log = logging.getLogger(__name__)

LABEL_REQUESTS = "label_requests.jsonl"
SCORES = "scores.jsonl"
HELDOUT_RUNS = "heldout_runs.jsonl"


class Outbox:
    def __init__(self, directory: str | Path):
        self.directory = Path(directory)

    def request_labels(self, items: list[LabelRequest]) -> int:
        now = _utc_stamp(datetime.now(UTC))
        return self._append(LABEL_REQUESTS, (label_request_record(r, now) for r in items))

    def write_scores(self, scores: list[JudgeScore]) -> int:
        return self._append(SCORES, (score_to_langfuse(s) for s in scores))

    def send_heldout_runs(
        self, dataset: str, items: list[HeldoutItem], runs: list[HeldoutRun], at: datetime
    ) -> SentRuns:
        """One line per run item: the dataset item it runs on, the version's reply and its
        score, in the names Langfuse gives them."""
        stamp = _utc_stamp(at.astimezone(UTC))
        lines = [
            heldout_run_record(dataset, item, run, stamp)
            for run in runs
            for item in run.scored(items)
        ]
        self._append(HELDOUT_RUNS, lines)
        counts = {run.name: len(run.scored(items)) for run in runs}
        return SentRuns(dataset=dataset, items=len(items), runs=counts)

    def requested_traces(self) -> set[str]:
        """Every trace a label was ever asked for here; an unreadable line is skipped, not
        fatal (at worst a trace is asked about twice)."""
        path = self.directory / LABEL_REQUESTS
        if not path.is_file():
            return set()
        asked = set()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            try:
                asked.add(str(json.loads(line)["objectId"]))
            except (json.JSONDecodeError, KeyError, TypeError) as e:
                log.warning("%s:%d: field objectId unreadable (%s); line skipped", path, number, e)
        return asked

    def _append(self, name: str, records: Iterable[dict[str, Any]]) -> int:
        lines = [json.dumps(r, ensure_ascii=False) + "\n" for r in records]
        if not lines:
            return 0
        path = self.directory / name
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as out:
                out.write("".join(lines))  # one write: a crash leaves no half batch behind
        except OSError as e:
            raise TraceSourceError(
                f"Cannot append to {path} ({e.strerror}): make FLYWHEEL_TRACES__OUTBOX_DIR (or "
                "the state folder) writable."
            ) from e
        return len(lines)


def label_request_record(request: LabelRequest, created_at: str) -> dict[str, Any]:
    """One line of label_requests.jsonl: what a Langfuse annotation queue item would name,
    plus why the judge asked."""
    return {
        "objectId": request.trace_id,
        "objectType": "TRACE",
        "reason": request.reason,
        "margin": request.margin,
        "judgeVersion": request.judge_version,
        "createdAt": created_at,
    }


def heldout_run_record(
    dataset: str, item: HeldoutItem, run: HeldoutRun, timestamp: str
) -> dict[str, Any]:
    return {
        "datasetName": dataset,
        "datasetItemId": item.item_id(dataset),
        "input": item.input,
        "expectedOutput": item.expected_output,
        "sourceTraceId": item.trace_id,
        "runName": run.name,
        "output": run.replies[item.example_id],
        "scoreName": SCORE_NAME,
        "score": run.scores[item.example_id],
        "timestamp": timestamp,
    }


def _utc_stamp(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")
