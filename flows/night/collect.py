"""From traces and annotations to what the stages consume: examples and judged items."""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from infra.agents import Agent
from infra.agents.replay import NOT_REPLAYABLE
from infra.scales import ScoreScale
from infra.traces import Annotation, RecordError, SkippedRecord, TraceBatch, TraceRecord
from infra.traces.record_shape import check_shape
from infra.traces.sessions import in_sessions
from infra.traces.types import GENERATION, TOOL
from infra.types import Example
from judges.labels import agreed_value, labelled_item, night_scale, value_on
from judges.trajectory import recorded_request
from judges.types import JudgedItem, LabelWindow

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CriterionLabels:
    """A secondary criterion's labels (`traces.criteria`), as its own judge learns from
    them: on the traces outside the held-out slice, on the annotation's own scale."""

    name: str  # its annotation name
    items: list[JudgedItem]
    scale: ScoreScale
    window: LabelWindow
    read_to: datetime | None = None  # the newest label time read tonight: its next watermark
    read_all: bool = False  # tonight read every label of the name, not from the watermark on
    # trace id -> when its label was made: which labels its judge in use never saw
    labelled_at: dict[str, datetime] = field(default_factory=dict)


@dataclass
class Collected:
    examples: list[Example]  # one per production trace the agent could read
    items: list[JudgedItem]  # traces with a human annotation on the night's scale
    skipped: list[SkippedRecord] = field(default_factory=list)
    outputs: dict[str, str] = field(default_factory=dict)  # trace id -> the reply as logged
    window: LabelWindow = field(default_factory=lambda: LabelWindow(0, None, None, None, None))
    scale: ScoreScale = ScoreScale("boolean")  # the annotation's, which the judge answers on
    heldout: list[Example] = field(default_factory=list)  # eval.heldout_trace_share's slice
    labels_new: int = 0  # labels the store did not hold before tonight (new or edited)
    # the newest label timestamp the source gave tonight (its clock): the next watermark
    labels_read_to: datetime | None = None
    labels_read_all: bool = False  # tonight read every label, not from the watermark on
    labels_answered: int = 0  # labels on traces active learning asked about, to date
    labels_conflicting: int = 0  # traces whose people's labels disagree: left out
    labels_outside_window: int = 0  # stored labels older than judge.label_window_days
    corrections: dict[str, str] = field(default_factory=dict)  # trace id -> corrected reply
    # trace id -> when its label was last made or edited: which labels a judge never saw
    labelled_at: dict[str, datetime] = field(default_factory=dict)
    # trace id -> what the agent was sent, as logged (its last generation's input)
    chats: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    # trace id -> a correction the teacher wrote from the reviewer's comment and the judge
    # passed (`flows.night.label_targets`); people's own corrections win over it
    written: dict[str, str] = field(default_factory=dict)
    # trace id -> when it started, and the Langfuse prompt versions that served it (those
    # with managed prompts only): which were a canary's (`flows.night.canary_check`)
    served: dict[str, tuple[datetime, dict[str, int]]] = field(default_factory=dict)
    # each secondary criterion's labels (a tuple: its class default is what a result
    # pickled before criteria reads)
    criteria: tuple[CriterionLabels, ...] = ()

    def human_replies(self) -> dict[str, list[tuple[str, float]]]:
        """Per trace of the night, the replies people judged, scored in [0, 1]: its reply
        as logged, 1 if they passed it and 0 if they failed it; a corrected reply 1, and
        then the logged one 0 (they said what it should have been instead). A correction
        the teacher wrote from their comment counts as theirs where they wrote none."""
        out: dict[str, list[tuple[str, float]]] = {}
        for item in self.items:
            if item.human_pass is not None and item.id in self.outputs:
                out.setdefault(item.id, []).append((item.output_text, float(item.human_pass)))
        for trace_id, text in (self.written | self.corrections).items():
            replies = [r for r in out.get(trace_id, []) if r[0] != self.outputs[trace_id]]
            out[trace_id] = [*replies, (text, 1.0), (self.outputs[trace_id], 0.0)]
        return out

    def reply_targets(self) -> dict[str, str]:
        """Per labelled trace of the night, the reply it should have given: a person's
        correction, else the teacher's from their comment, else the reply they passed."""
        passed = {
            item.id: self.outputs[item.id]
            for item in self.items
            if item.human_pass and item.id in self.outputs
        }
        return passed | self.written | self.corrections

    def judged_items(self) -> list[JudgedItem]:
        """Every readable trace of the night as the judge reads it, labelled or not."""
        return [
            JudgedItem(ex.id, recorded_request(ex), self.outputs[ex.id]) for ex in self.examples
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
    labels: list[tuple[Annotation, TraceRecord]] | None = None,
    max_text_chars: int | None = None,
) -> Collected:
    """Examples from the night's traces, and the labels named `annotation_name` as judged
    items on their scale (`scale`: the source's, if it has one; else inferred). `labels`:
    each label with its trace (the label store's, all to date); None: the batch's own.
    A trace whose request or reply is longer than `max_text_chars` is quarantined: skipped,
    and named, before any model sees it."""
    skipped = list(batch.skipped)
    examples: dict[str, Example] = {}
    outputs: dict[str, str] = {}
    chats: dict[str, list[dict[str, str]]] = {}
    served: dict[str, tuple[datetime, dict[str, int]]] = {}

    def _example(trace: TraceRecord) -> Example | None:
        return _readable(agent, trace, skipped, max_text_chars)

    traces = one_record_per_trace(batch.traces, skipped)
    for trace in traces:
        example = _example(trace)
        if example is not None:
            examples[trace.trace_id] = example
            outputs[trace.trace_id] = trace.output_text
            chats[trace.trace_id] = trace.messages
            if trace.served_prompts:
                served[trace.trace_id] = (trace.start_time, trace.served_prompts)
    if labels is None:
        by_id = {t.trace_id: t for t in traces if t.trace_id in examples}
        labels = [(a, by_id[a.trace_id]) for a in batch.annotations if a.trace_id in by_id]
    tonight = {t.trace_id for t in traces}  # read above, skipped there if unusable
    named = []  # (annotation, example, reply)
    for ann, trace in labels:
        if ann.name != annotation_name:
            continue
        if trace.trace_id in tonight:
            example = examples.get(trace.trace_id)
        else:  # an older trace, from the label store
            example = _example(trace)
        if example is not None:
            named.append((ann, example, trace.output_text))
    scale = night_scale(annotation_name, scale, [ann for ann, _, _ in named])
    # trace id -> annotation id -> (annotation, value, example, reply): each person's label
    latest: dict[str, dict[str, tuple]] = {}
    for ann, example, reply in named:
        value = value_on(scale, ann)
        if value is None:
            reason = (
                f"score {ann.id}: {ann.value!r} ({ann.data_type}) is not on the "
                f"{scale.describe()} scale of {annotation_name!r}"
            )
            skipped.append(SkippedRecord("scores", 0, "value", reason))
            log.warning("skipped %s", reason)
            continue
        mine = latest.setdefault(ann.trace_id, {})
        kept = mine.get(ann.id)
        if kept is None or ann.timestamp >= kept[0].timestamp:  # the latest edit wins
            mine[ann.id] = (ann, value, example, reply)
    agreed, conflicting = _agreed(latest, scale, skipped)
    items = [
        labelled_item(ann, value, recorded_request(example), reply)
        for ann, value, example, reply in agreed
    ]
    stamps = [ann.timestamp for ann, _, _, _ in agreed]
    window = LabelWindow(
        len(items), min(stamps, default=None), max(stamps, default=None), since, fetched_at
    )
    # the latest correction of each of tonight's readable traces
    corrections = {
        c.trace_id: c.text
        for c in sorted(batch.corrections, key=lambda c: c.timestamp)
        if c.trace_id in examples
    }
    return Collected(
        list(examples.values()),
        items,
        skipped,
        outputs,
        window,
        scale,
        labels_conflicting=conflicting,
        corrections=corrections,
        labelled_at={ann.trace_id: ann.timestamp for ann, _, _, _ in agreed},
        chats=chats,
        served=served,
    )


def one_record_per_trace(
    traces: list[TraceRecord], skipped: list[SkippedRecord]
) -> list[TraceRecord]:
    """Each trace's last generation, which its annotation is about, carrying the trace's
    generations and tool calls in recorded order as its `steps` when it has several (an
    agent that replays them step by step reads those). A trace with no generation is
    named as left out; spans and other observation types only group the steps. A trace
    of a session carries the conversation before it (`infra.traces.sessions`)."""
    grouped: dict[str, dict[str, TraceRecord]] = {}  # trace -> observation id -> it
    for trace in traces:
        if trace.type in (GENERATION, TOOL):
            grouped.setdefault(trace.trace_id, {})[trace.id] = trace
    records = []
    for trace_id, observations in grouped.items():
        steps = sorted(observations.values(), key=lambda t: t.start_time)  # stable: ties keep order
        generations = [t for t in steps if t.type == GENERATION]
        if not generations:
            reason = f"trace {trace_id}: no generation, only tool calls"
            skipped.append(SkippedRecord("traces", 0, "type", reason))
            log.warning("skipped %s", reason)
            continue
        last = generations[-1]
        steps = steps[: steps.index(last) + 1]  # what ran after the last reply is not its
        records.append(replace(last, steps=tuple(steps)) if len(steps) > 1 else last)
    return in_sessions(records)


def _agreed(
    latest: dict[str, dict[str, tuple]], scale: ScoreScale, skipped: list[SkippedRecord]
) -> tuple[list[tuple], int]:
    """Per trace one (annotation, value, example, reply): its people's labels agreed
    (`agreed_value`), under the latest annotation; a trace whose labels contradict each
    other is left out and named, until a person settles it."""
    agreed, conflicting = [], 0
    for trace_id, by_annotation in latest.items():
        rows = sorted(by_annotation.values(), key=lambda r: (r[0].timestamp, r[0].id))
        value = agreed_value(scale, [r[1] for r in rows])
        if value is None:
            said = ", ".join(f"{r[0].id}: {r[1]!r}" for r in rows)
            reason = f"trace {trace_id}: its labels disagree ({said}); left out until settled"
            skipped.append(SkippedRecord("scores", 0, "value", reason))
            log.warning("skipped %s", reason)
            conflicting += 1
            continue
        ann, _, example, reply = rows[-1]
        agreed.append((ann, value, example, reply))
    return agreed, conflicting


def in_heldout_slice(trace_id: str, share: float) -> bool:
    """Whether a trace belongs to the fixed held-out slice: a hash of its id, so the same
    trace is held out every night, whichever night reads it."""
    digest = int(hashlib.sha256(trace_id.encode()).hexdigest()[:8], 16)
    return digest % 10_000 < share * 10_000


def hold_out(collected: Collected, share: float) -> Collected:
    """Move the slice's traces out of training, alignment and GEPA: tonight's become the
    held-out examples (scored by the judge: a trace has no true answer), labelled ones are
    dropped from the judge's items."""
    if share <= 0:
        return collected
    held = {e.id for e in collected.examples if in_heldout_slice(e.id, share)}
    return replace(
        collected,
        examples=[e for e in collected.examples if e.id not in held],
        items=[i for i in collected.items if not in_heldout_slice(i.id, share)],
        heldout=[e for e in collected.examples if e.id in held],
        corrections={t: c for t, c in collected.corrections.items() if t not in held},
        chats={t: c for t, c in collected.chats.items() if t not in held},
    )


def _readable(
    agent: Agent, trace: TraceRecord, skipped: list[SkippedRecord], max_chars: int | None
) -> Example | None:
    try:
        if max_chars is not None:
            _check_size(trace, max_chars)
        return agent.example_from_trace(trace).in_conversation(trace.conversation)
    except RecordError as err:
        skipped.append(SkippedRecord("traces", 0, err.field, f"trace {trace.trace_id}: {err}"))
        log.warning("skipped trace %s: field %s: %s", trace.trace_id, err.field, err)
        return None


def _check_size(trace: TraceRecord, max_chars: int) -> None:
    """Whole fields, not only the last message: a history or a tool result can be the
    long part."""
    for field_name, value in (("input", trace.input), ("output", trace.output)):
        size = len(value) if isinstance(value, str) else len(json.dumps(value, default=str))
        if size > max_chars:
            raise RecordError(
                field_name,
                f"{size:,} characters, over traces.max_text_chars ({max_chars:,}): "
                "quarantined, no model sees it",
            )


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
            if isinstance(row, dict):
                check_shape(row)  # before the masking walks it
            examples.append(
                Example(id=str(row["id"]), inputs=row["inputs"], reference=row.get("reference"))
            )
        except (ValueError, RecursionError, KeyError, TypeError) as err:
            log.warning("%s:%d: skipped held-out example: %s", path, number, err)
    return examples


def summarize(collected: Collected) -> dict[str, int]:
    out = {
        "traces": len(collected.examples),
        "annotations": len(collected.items),  # labels the judge learns from, to date
        "annotations_new": collected.labels_new,
        "annotations_answered": collected.labels_answered,
        "annotations_conflicting": collected.labels_conflicting,
        "annotations_outside_window": collected.labels_outside_window,
        "corrections": len(collected.corrections),  # corrected replies on tonight's traces
        # corrections the teacher wrote from comments and the judge passed
        "corrections_written": len(collected.written),
    }
    passes = [i.human_pass for i in collected.items if i.human_pass is not None]
    if passes:  # a pass/fail annotation
        out["annotations_pass"] = sum(passes)
    # traces a replay cannot re-run (a tool would see other arguments): also skipped
    replay = sum(1 for s in collected.skipped if s.field == NOT_REPLAYABLE)
    return out | {"skipped_records": len(collected.skipped), "not_replayable": replay}


def trace_window(window: LabelWindow) -> dict[str, str]:
    """The night's fetch as provenance: where its window started ("all": no lookback)
    and when it was fetched."""

    def iso(moment: datetime | None, none: str) -> str:
        return moment.isoformat() if moment else none

    return {"since": iso(window.since, "all"), "fetched_at": iso(window.fetched_at, "unknown")}
