"""The night's held-out evaluations as the trace source's dataset runs: the report's own
scores, one run per version named for it, and a failure said in the report, not raised."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from flows.night.heldout_dataset import (
    heldout_items,
    heldout_runs,
    run_names,
    send_heldout_dataset,
)
from flows.night.stages import Evaluation
from infra.settings import TraceSettings
from infra.traces.heldout_runs import SCORE_NAME
from infra.traces.langfuse_source import LangfuseTraceSource
from infra.types import Example
from tests.fake_langfuse_datasets import FakeLangfuseDatasets

AT = datetime(2026, 12, 7, 2, 0, tzinfo=UTC)
EXAMPLES = [
    Example("t-1", {"question": "refund?"}),
    Example("t-2", {"question": "invoice?"}),
    Example("t-9", {"question": "not in the gate's slice"}),
]


def evaluation(scores: dict[str, float]) -> Evaluation:
    return Evaluation(
        n=len(scores),
        accuracy=None,
        judge_pass_rate=sum(scores.values()) / len(scores),
        scores=scores,
        outputs={i: f"reply to {i}" for i in scores},
        requests={i: f"request {i}" for i in scores},
    )


EVALS = {
    "seed": evaluation({"t-1": 0.0, "t-2": 1.0}),
    "candidate": evaluation({"t-1": 1.0, "t-2": 1.0}),
}


def test_runs_are_named_for_the_version_they_evaluated_and_the_night():
    names = run_names(EVALS, "agent", {"seed": 6, "candidate": 7}, "n1")
    assert names == {
        "seed": "agent v6 (production), night n1",
        "candidate": "agent v7 (candidate), night n1",
    }
    first = run_names(EVALS, "agent", {"seed": None, "candidate": 1}, "n0")
    assert first["seed"] == "the seed prompts (production), night n0"


def test_items_are_the_scored_examples_linked_to_the_traces_they_were_held_out_from():
    items = heldout_items(EXAMPLES, EVALS, traces={"t-1"})
    assert [(i.example_id, i.trace_id) for i in items] == [("t-1", "t-1"), ("t-2", None)]


def test_a_night_s_runs_in_langfuse_hold_the_reports_scores():
    names = run_names(EVALS, "agent", {"seed": 6, "candidate": 7}, "n1")
    items = heldout_items(EXAMPLES, EVALS, traces={"t-1", "t-2"})
    with FakeLangfuseDatasets() as fake:
        source = LangfuseTraceSource(TraceSettings(source="langfuse"), api=fake.sdk_api())

        async def send(items, runs):
            return source.send_heldout_runs("flywheel-heldout", items, runs, AT)

        sent = asyncio.run(
            send_heldout_dataset("flywheel-heldout", items, heldout_runs(EVALS, names), send)
        )
    runs = fake.store.runs("flywheel-heldout")
    for label, evaluation in EVALS.items():
        linked = runs[names[label]]
        figures = {
            fake.store.items[item]["sourceTraceId"]: fake.store.trace_scores(trace)[SCORE_NAME]
            for item, trace in linked.items()
        }
        assert figures == evaluation.scores
    assert sent.runs == {names["seed"]: 2, names["candidate"]: 2}
    (line,) = sent.lines()
    assert "'flywheel-heldout' (2 items)" in line and names["candidate"] in line


def test_a_langfuse_error_becomes_a_sentence_of_the_report_not_an_exception():
    items = heldout_items(EXAMPLES, EVALS, traces=set())
    with FakeLangfuseDatasets() as fake:
        fake.store.fail = "/api/public/dataset-items"
        source = LangfuseTraceSource(TraceSettings(source="langfuse"), api=fake.sdk_api())

        async def send(items, runs):
            return source.send_heldout_runs("flywheel-heldout", items, runs, AT)

        names = run_names(EVALS, "agent", {}, "n1")
        sent = asyncio.run(
            send_heldout_dataset("flywheel-heldout", items, heldout_runs(EVALS, names), send)
        )
    assert sent.runs == {}
    (line,) = sent.lines()
    assert line.startswith("Held-out dataset runs: none; sending them failed (TraceSourceError")
    assert "(500)" in line


def test_nothing_is_sent_without_a_dataset_name_or_a_scored_example():
    async def never(items, runs):
        raise AssertionError("sent")

    off = asyncio.run(send_heldout_dataset("", [], [], never))
    assert off.lines() == ["Held-out dataset runs: none; traces.heldout_dataset is empty."]
    empty = asyncio.run(send_heldout_dataset("flywheel-heldout", [], [], never))
    assert empty.note == "the night scored no held-out examples"
