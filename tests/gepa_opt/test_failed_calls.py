"""Calls that fail (`CallFailed`): tried again, never scored, never charged, counted."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from gepa_opt import (
    CallFailed,
    EvaluationBatch,
    GEPAConfig,
    ProposalRejected,
    RejectReason,
    StopReason,
    optimize,
)
from gepa_opt.types import Candidate, candidate_digest
from tests.gepa_opt.test_engine import KeywordAdapter, KeywordReflector, Task, tasks

SEED = {"instructions": "Answer the question."}


@dataclass
class FlakyAdapter(KeywordAdapter):
    """Fails the first `fail_tries` tries of each (candidate, split, example) that
    `fails` picks; counts every try it failed."""

    fails: object = lambda candidate, task: False  # noqa: E731
    fail_tries: int = 1
    tries: dict[tuple[str, str, int], int] = field(default_factory=dict)
    failed: int = 0

    async def evaluate(
        self, batch: list[Task], candidate: Candidate, capture_traces: bool = False
    ) -> EvaluationBatch:
        (task,) = batch
        key = (candidate_digest(candidate), task.split, task.id)
        self.tries[key] = self.tries.get(key, 0) + 1
        if self.fails(candidate, task) and self.tries[key] <= self.fail_tries:
            self.failed += 1
            raise CallFailed(f"HTTP 503 on {key}")
        return await super().evaluate(batch, candidate, capture_traces)


async def run(adapter, config: GEPAConfig, reflector=None, events=None):
    return await optimize(
        SEED,
        tasks("train", 12),
        tasks("val", 6),
        adapter,
        reflector or KeywordReflector(),
        config,
        example_id=lambda t: t.id,
        on_event=events.append if events is not None else None,
    )


async def test_calls_that_fail_then_succeed_change_nothing_but_the_count():
    config = GEPAConfig(max_metric_calls=80, seed=3)
    clean = await run(KeywordAdapter(), config)
    flaky = FlakyAdapter(fails=lambda c, t: t.id % 3 == 0, fail_tries=2)
    faulty = await run(flaky, config)

    assert flaky.failed > 10
    assert faulty.failed_calls == flaky.failed
    # same search, same scores, same spend: a failed try is no result and costs nothing
    assert faulty.candidates == clean.candidates
    assert faulty.val_subscores == clean.val_subscores
    assert faulty.metric_calls_used == clean.metric_calls_used
    assert len(flaky.evaluated) == faulty.metric_calls_used


async def test_an_example_that_always_fails_is_never_scored_nor_charged():
    flaky = FlakyAdapter(fails=lambda c, t: t.split == "train" and t.id == 4, fail_tries=99)
    events = []
    config = GEPAConfig(max_metric_calls=80, seed=0, call_attempts=2)
    result = await run(flaky, config, None, events)

    rejected = [e for e in events if isinstance(e, ProposalRejected)]
    failed = [e for e in rejected if e.reason is RejectReason.FAILED_CALLS]
    assert failed, "some minibatch held the failing example"
    assert result.rejections[RejectReason.FAILED_CALLS] == len(failed)
    assert all(4 not in r.minibatch_ids or r.reject_reason for r in result.history)
    assert result.failed_calls == flaky.failed
    assert len(flaky.evaluated) == result.metric_calls_used  # tries paid = results, no more
    assert result.metric_calls_used <= 80
    assert result.best_score > result.val_aggregate_scores[0]  # and the search went on


async def test_a_failing_winner_valset_pass_rejects_it_and_its_continued_group():
    # the first accepted child ("... cite") cannot be scored on val example 5
    flaky = FlakyAdapter(
        fails=lambda c, t: t.split == "val" and t.id == 5 and "cite" in c["instructions"],
        fail_tries=99,
    )
    config = GEPAConfig(max_metric_calls=60, seed=0, continue_winners=True, call_attempts=1)
    result = await run(flaky, config)

    assert all(len(scores) == 6 for scores in result.val_subscores)
    assert not any("cite" in c["instructions"] for c in result.candidates)
    assert result.rejections[RejectReason.FAILED_CALLS] >= 2  # the winner, then its successor
    assert result.stop_reason is StopReason.BUDGET


async def test_too_many_failed_calls_stop_the_run_with_what_it_has():
    flaky = FlakyAdapter(fails=lambda c, t: c != SEED, fail_tries=99)
    config = GEPAConfig(max_metric_calls=200, seed=0, max_failed_calls=5, call_attempts=1)
    result = await run(flaky, config)

    assert result.stop_reason is StopReason.FAILED_CALLS
    assert 5 <= result.failed_calls < 5 + config.reflection_minibatch_size
    assert result.candidates == [SEED]


async def test_a_failing_reflection_is_a_rejected_proposal_and_uses_its_reflection_budget():
    async def down(prompt: str) -> str:
        raise CallFailed("reflection endpoint down")

    config = GEPAConfig(max_metric_calls=200, seed=0, max_reflection_calls=4)
    result = await run(KeywordAdapter(), config, reflector=down)

    assert result.stop_reason is StopReason.REFLECTION_BUDGET
    assert result.reflection_calls == 4 and result.failed_calls == 4
    assert result.rejections == {RejectReason.FAILED_CALLS: 4}


async def test_a_seed_that_cannot_be_scored_ends_the_run_naming_it():
    flaky = FlakyAdapter(fails=lambda c, t: t.split == "val" and t.id == 2, fail_tries=99)
    with pytest.raises(CallFailed, match=r"seed's valset pass: val examples \[2\]"):
        await run(flaky, GEPAConfig(max_metric_calls=50, call_attempts=2))
    assert flaky.failed == 2


async def test_the_journal_gives_back_the_charge_of_a_call_that_failed_for_good(tmp_path):
    from gepa_opt.journal import CallJournal

    flaky = FlakyAdapter(fails=lambda c, t: t.split == "train" and t.id == 4, fail_tries=99)
    config = GEPAConfig(max_metric_calls=60, seed=0, call_attempts=2, run_dir=str(tmp_path))
    result = await run(flaky, config)

    assert result.rejections.get(RejectReason.FAILED_CALLS)
    # what a resumed run would count as paid: the results, not the failed calls
    assert CallJournal(tmp_path / "calls.jsonl").replay(0).paid == result.metric_calls_used
