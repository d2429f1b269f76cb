"""From traces and annotations to what the stages consume: examples and judged items."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from infra.agents import Agent
from infra.scales import ScoreScale
from infra.traces import RecordError, SkippedRecord, TraceBatch
from infra.types import Example
from judges.labels import labelled_item, night_scale, value_on
from judges.types import JudgedItem, LabelWindow, render_inputs

log = logging.getLogger(__name__)


@dataclass
class Collected:
    examples: list[Example]  # one per production trace the agent could read
    items: list[JudgedItem]  # traces with a human annotation on the night's scale
    skipped: list[SkippedRecord] = field(default_factory=list)
    outputs: dict[str, str] = field(default_factory=dict)  # trace id -> the reply as logged
    window: LabelWindow = field(default_factory=lambda: LabelWindow(0, None, None, None, None))
    scale: ScoreScale = ScoreScale("boolean")  # the annotation's, which the judge answers on

    def judged_items(self) -> list[JudgedItem]:
        """Every readable trace of the night as the judge reads it, labelled or not."""
        return [
            JudgedItem(ex.id, render_inputs(ex.inputs), self.outputs[ex.id]) for ex in self.examples
        ]


def window_start(lookback_hours: int | None, now: datetime | None = None) -> datetime | None:
    """Where the night's trace window starts; None = every trace the source has."""
    if lookback_hours is None:
        return None
    return (now or datetime.now(UTC)) - timedelta(hours=lookback_hours)


def collect(
    batch: TraceBatch,
    agent: Agent,
    annotation_name: str,
    since: datetime | None = None,
    fetched_at: datetime | None = None,
    scale: ScoreScale | None = None,
) -> Collected:
    """Examples from the traces, and the annotations named `annotation_name` as judged
    items on their scale (`scale`: the source's, if it has one; else inferred)."""
    skipped = list(batch.skipped)
    examples: dict[str, Example] = {}
    outputs: dict[str, str] = {}
    for trace in batch.traces:
        try:
            examples[trace.trace_id] = agent.example_from_trace(trace)
        except RecordError as err:
            skipped.append(SkippedRecord("traces", 0, err.field, f"trace {trace.trace_id}: {err}"))
            log.warning("skipped trace %s: field %s: %s", trace.trace_id, err.field, err)
            continue
        outputs[trace.trace_id] = trace.output_text
    named = [a for a in batch.annotations if a.name == annotation_name and a.trace_id in examples]
    scale = night_scale(annotation_name, scale, named)
    items = []
    stamps = []
    for ann in named:
        value = value_on(scale, ann)
        if value is None:
            reason = (
                f"score {ann.id}: {ann.value!r} ({ann.data_type}) is not on the "
                f"{scale.describe()} scale of {annotation_name!r}"
            )
            skipped.append(SkippedRecord("scores", 0, "value", reason))
            log.warning("skipped %s", reason)
            continue
        inputs = render_inputs(examples[ann.trace_id].inputs)
        items.append(labelled_item(ann, value, inputs, outputs[ann.trace_id]))
        stamps.append(ann.timestamp)
    window = LabelWindow(
        len(items), min(stamps, default=None), max(stamps, default=None), since, fetched_at
    )
    return Collected(list(examples.values()), items, skipped, outputs, window, scale)


def load_heldout(path: Path) -> list[Example]:
    """Held-out requests with true labels (`{"id", "inputs", "reference"}` per line)."""
    if not path.exists():
        return []
    examples = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            examples.append(
                Example(id=str(row["id"]), inputs=row["inputs"], reference=row.get("reference"))
            )
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            log.warning("%s:%d: skipped held-out example: %s", path, number, err)
    return examples


def summarize(collected: Collected) -> dict[str, int]:
    out = {"traces": len(collected.examples), "annotations": len(collected.items)}
    passes = [i.human_pass for i in collected.items if i.human_pass is not None]
    if passes:  # a pass/fail annotation
        out["annotations_pass"] = sum(passes)
    return out | {"skipped_records": len(collected.skipped)}
