"""When a metric call is charged and journaled as paid: as it is sent, not when it is
planned; and a pair whose answer a kill lost is asked again under its first charge."""

from __future__ import annotations

import asyncio

import pytest

from gepa_opt.budget import Budget
from gepa_opt.cache import EvaluationCache, Split
from gepa_opt.evaluator import Evaluator
from gepa_opt.journal import CallJournal
from gepa_opt.types import CallFailed, EvaluationBatch, candidate_digest
from gepa_opt.workers import WorkerPool

SEED = {"p": "Answer."}
VALSET = [(i, f"question {i}") for i in range(10)]


class GatedAdapter:
    """Holds every call until `gate` opens; fails every try for the ids in `down`."""

    def __init__(self, down: frozenset[int] = frozenset()) -> None:
        self.gate = asyncio.Event()
        self.started: list[str] = []
        self.down = down

    async def evaluate(self, batch, candidate, capture_traces=False):
        self.started.append(batch[0])
        await self.gate.wait()
        if int(batch[0].split()[-1]) in self.down:
            raise CallFailed("HTTP 503")
        return EvaluationBatch(outputs=["answer"], scores=[1.0])


def key(example_id: int) -> tuple[str, Split, int]:
    return (candidate_digest(SEED), Split.VAL, example_id)


def evaluator(tmp_path, adapter, lost=()) -> tuple[Evaluator, CallJournal, Budget]:
    """Resumed from a journal where a killed process had sent the examples `lost`."""
    journal = CallJournal(tmp_path / "calls.jsonl")
    journal.paid([key(i) for i in lost])
    replayed = journal.replay(0)
    budget = Budget(max_metric_calls=10, metric_calls_used=replayed.paid)
    workers, cache = WorkerPool(2), EvaluationCache()
    return Evaluator(adapter, cache, workers, journal, 2, replayed.unanswered), journal, budget


async def test_a_call_waiting_for_a_worker_slot_is_neither_charged_nor_journaled(tmp_path):
    adapter = GatedAdapter()
    calls, journal, budget = evaluator(tmp_path, adapter)
    reservation = budget.reserve(10)
    evaluation = asyncio.create_task(calls.evaluate(SEED, Split.VAL, VALSET, reservation))
    await asyncio.sleep(0.01)
    # two slots: two calls sent, eight waiting; a kill now would have made two
    assert len(adapter.started) == 2
    assert journal.replay(0).paid == 2 == budget.metric_calls_used
    assert reservation.left == 8 and budget.remaining == 0  # the rest stays reserved
    adapter.gate.set()
    _, charged = await evaluation
    assert charged == 10 and journal.replay(0).paid == 10 == budget.metric_calls_used


async def test_a_pair_lost_at_a_kill_is_asked_again_under_its_first_charge(tmp_path):
    adapter = GatedAdapter()
    adapter.gate.set()
    calls, journal, budget = evaluator(tmp_path, adapter, lost=[0])
    assert budget.metric_calls_used == 1  # the lost call was made
    assert calls.missing(SEED, Split.VAL, VALSET) == 9
    _, charged = await calls.evaluate(SEED, Split.VAL, VALSET, budget.reserve(9))
    assert len(adapter.started) == 10 and charged == 9
    replayed = journal.replay(0)
    assert replayed.paid == 10 == budget.metric_calls_used  # 0 answered, not charged twice
    assert not replayed.unanswered


async def test_a_lost_pair_that_fails_again_keeps_its_charge_a_new_one_gives_it_back(tmp_path):
    adapter = GatedAdapter(down=frozenset({0, 1}))
    adapter.gate.set()
    calls, journal, budget = evaluator(tmp_path, adapter, lost=[0])
    reservation = budget.reserve(calls.missing(SEED, Split.VAL, VALSET))
    with pytest.raises(CallFailed, match=r"examples \[0, 1\]"):
        await calls.evaluate(SEED, Split.VAL, VALSET, reservation)
    # 1 failed for good: its charge came back; 0 was lost before, and was made then
    replayed = journal.replay(0)
    assert replayed.paid == 1 + 8 == budget.metric_calls_used
    assert replayed.unanswered == {key(0)}
    assert calls.missing(SEED, Split.VAL, VALSET) == 1  # 1 costs again; 0 is still paid for
