"""The GEPA loop end to end, with a scripted adapter and a scripted reflection LM."""

import asyncio
import re
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gepa_opt import (
    BudgetUsed,
    EvaluationBatch,
    Finished,
    FrontierChanged,
    GEPAConfig,
    GEPAEngine,
    GEPAEvent,
    MergeTried,
    ProposalAccepted,
    ProposalFinished,
    ProposalRejected,
    ProposalStarted,
    RejectReason,
    StopReason,
    optimize,
)
from gepa_opt.shape import ProposalShape
from gepa_opt.stopping import LMUsage, StopRules
from gepa_opt.types import Candidate, candidate_digest

KEYWORDS = ["cite", "units", "brief", "table", "verify", "cents"]


@dataclass(frozen=True)
class Task:
    split: str
    id: int
    keyword: str


def tasks(split: str, n: int) -> list[Task]:
    return [Task(split, i, KEYWORDS[i % len(KEYWORDS)]) for i in range(n)]


@dataclass
class KeywordAdapter:
    """Scores 1 when the candidate's texts mention the example's keyword; the feedback
    names the missing keyword. Logs every (candidate, split, example) it is paid for."""

    evaluated: list[tuple[str, str, int]] = field(default_factory=list)
    calls: list[tuple[str, int, bool]] = field(default_factory=list)
    delay_s: float = 0.0
    """Each call sleeps delay_s x (1 + example id % 3): completion order then varies."""
    in_flight: int = 0
    most_in_flight: int = 0

    async def evaluate(
        self, batch: list[Task], candidate: Candidate, capture_traces: bool = False
    ) -> EvaluationBatch:
        text = " ".join(candidate.values())
        self.calls.append((batch[0].split, len(batch), capture_traces))
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay_s * (1 + batch[0].id % 3))
        finally:
            self.in_flight -= 1
        self.evaluated.extend((candidate_digest(candidate), t.split, t.id) for t in batch)
        hits = [t.keyword in text for t in batch]
        return EvaluationBatch(
            outputs=[f"answer to {t.id}" for t in batch],
            scores=[float(h) for h in hits],
            trajectories=[{"task": t, "hit": h} for t, h in zip(batch, hits, strict=True)]
            if capture_traces
            else None,
        )

    async def make_reflective_dataset(
        self, candidate: Candidate, eval_batch: EvaluationBatch, components_to_update: list[str]
    ) -> dict[str, list[dict[str, Any]]]:
        assert eval_batch.trajectories is not None
        records = [
            {
                "Inputs": f"task {tr['task'].id}",
                "Generated Outputs": out,
                "Feedback": "Correct."
                if tr["hit"]
                else f"The response must mention '{tr['task'].keyword}'.",
            }
            for out, tr in zip(eval_batch.outputs, eval_batch.trajectories, strict=True)
        ]
        return {c: records for c in components_to_update}


@dataclass
class KeywordReflector:
    """Adds the first keyword the feedback asks for that the instruction lacks."""

    prompts: list[str] = field(default_factory=list)

    async def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        current = prompt.split("```\n", 1)[1].split("\n```", 1)[0]
        wanted = [k for k in re.findall(r"must mention '(\w+)'", prompt) if k not in current]
        return f"Here you go:\n```\n{current} {wanted[0]}\n```" if wanted else current


@dataclass
class ScriptedReflector:
    """Replies from a script, then proposes nothing."""

    replies: list[str | None]
    prompts: list[str] = field(default_factory=list)

    async def __call__(self, prompt: str) -> str | None:
        self.prompts.append(prompt)
        return self.replies.pop(0) if self.replies else ""


@dataclass
class TableAdapter(KeywordAdapter):
    """Every example scores the value the table gives the candidate's first text."""

    table: dict[str, float] = field(default_factory=dict)

    async def evaluate(
        self, batch: list[Task], candidate: Candidate, capture_traces: bool = False
    ) -> EvaluationBatch:
        result = await super().evaluate(batch, candidate, capture_traces)
        score = self.table[next(iter(candidate.values()))]
        return EvaluationBatch(result.outputs, [score] * len(batch), result.trajectories)


async def run_keyword_task(config: GEPAConfig, events: list[GEPAEvent] | None = None):
    adapter = KeywordAdapter()
    result = await optimize(
        {"instructions": "Answer the question."},
        tasks("train", 12),
        tasks("val", 6),
        adapter,
        KeywordReflector(),
        config,
        on_event=None if events is None else events.append,
    )
    return result, adapter


async def test_optimizer_improves_the_toy_task() -> None:
    result, _ = await run_keyword_task(GEPAConfig(max_metric_calls=400, seed=1))
    assert result.val_aggregate_scores[0] == 0.0
    assert result.best_score == 1.0
    assert all(k in result.best_candidate["instructions"] for k in KEYWORDS)
    assert result.metric_calls_used <= 400
    # Lineage: every candidate but the seed descends from an earlier one.
    assert result.parents[0] == ()
    assert all(len(p) == 1 and p[0] < k for k, p in enumerate(result.parents) if k)


async def test_the_pool_gives_each_candidate_s_parents_and_val_score_in_pool_order() -> None:
    result, _ = await run_keyword_task(GEPAConfig(max_metric_calls=150, seed=1))
    pool = result.pool()
    assert [e.parents for e in pool] == result.parents
    assert [e.val_score for e in pool] == result.val_aggregate_scores
    assert all(e.found_at is None for e in pool)  # when: its listener's to say


async def test_same_seed_replays_the_same_run() -> None:
    first_events: list[GEPAEvent] = []
    second_events: list[GEPAEvent] = []
    config = GEPAConfig(max_metric_calls=150, seed=7)
    first, _ = await run_keyword_task(config, first_events)
    second, _ = await run_keyword_task(config, second_events)
    assert first == second
    assert first_events == second_events


async def test_one_worker_replays_batched_proposals_exactly() -> None:
    """With max_concurrency=1 a wide shape still replays: the one slot goes by priority,
    then first come, first served. The adapter answers without sleeping: a call that took
    wall time could end before another group's coroutines reach the slot on a loaded
    machine, and hand the slot elsewhere (seen under load with a 1 ms sleep). Siblings are
    "best", not "auto": auto decides from measured call latencies, wall clock that a loaded
    machine changes between the two runs (failed 2-4 times in 40 under load)."""
    config = GEPAConfig(
        max_metric_calls=150, seed=3, proposal_shape="2x2", max_concurrency=1, siblings="best"
    )
    runs = []
    for _ in range(2):
        events: list[GEPAEvent] = []
        adapter = KeywordAdapter()
        result = await optimize(
            {"p": "Answer."}, tasks("train", 6), tasks("val", 4), adapter, KeywordReflector(),
            config, on_event=events.append,
        )  # fmt: skip
        assert adapter.most_in_flight == 1
        runs.append((result, events))
    assert runs[0] == runs[1]
    assert len({r.iteration for r in runs[0][0].history}) == len(runs[0][0].history) > 4


async def test_a_proposal_starts_when_one_ends_not_after_a_barrier() -> None:
    events: list[GEPAEvent] = []
    adapter = KeywordAdapter(delay_s=0.005)
    result = await optimize(
        {"p": "Answer."}, tasks("train", 6), tasks("val", 3), adapter, KeywordReflector(),
        GEPAConfig(max_metric_calls=120, proposal_shape="4x1", max_concurrency=4,
                   reflection_minibatch_size=2, skip_perfect_score=False,
                   continue_winners=False),
        on_event=events.append,
    )  # fmt: skip
    fifth = next(
        k for k, e in enumerate(events) if isinstance(e, ProposalStarted) and e.iteration == 5
    )
    finished_before = [
        e for e in events[:fifth] if isinstance(e, ProposalAccepted | ProposalRejected)
    ]
    # With a barrier the 5th proposal would wait for all 4 of the first wave.
    assert 1 <= len(finished_before) < 4
    assert 0 < result.worker_utilization <= 1
    assert result.wall_seconds > 0


def most_proposals_at_once(events: list[GEPAEvent]) -> int:
    running = most = 0
    for event in events:
        if isinstance(event, ProposalStarted):
            running += 1
        elif isinstance(event, ProposalAccepted | ProposalRejected):
            running -= 1
        most = max(most, running)
    return most


async def test_proposals_in_flight_follow_the_shape_however_many_slots_idle() -> None:
    # continue_winners off: a group continuing from its winner frees its place while the
    # winner's valset pass runs, so by events alone (ProposalAccepted comes after that
    # pass) a third proposal could look in flight on a slow machine
    config = dict(max_metric_calls=150, proposal_shape="2x1", reflection_minibatch_size=2,
                  skip_perfect_score=False, continue_winners=False)  # fmt: skip
    most = {}
    for workers in (2, 6):
        events: list[GEPAEvent] = []
        adapter = KeywordAdapter(delay_s=0.005)
        await optimize(
            {"p": "Answer."}, tasks("train", 6), tasks("val", 3), adapter, KeywordReflector(),
            GEPAConfig(max_concurrency=workers, **config), on_event=events.append,
        )  # fmt: skip
        most[workers] = most_proposals_at_once(events)
        assert adapter.most_in_flight <= workers
    # the shape's width, spare slots or not (in_flight="front" is in test_gepa_groups.py)
    assert most[2] == most[6] == 2


async def test_minibatch_acceptance_needs_a_strictly_higher_sum() -> None:
    adapter = TableAdapter(table={"seed": 0.5, "worse": 0.2, "equal": 0.5, "better": 0.75})
    reflector = ScriptedReflector(["```\nworse\n```", "```\nequal\n```", "```\nbetter\n```"])
    events: list[GEPAEvent] = []
    result = await optimize(
        {"p": "seed"},
        tasks("train", 4),
        tasks("val", 2),
        adapter,
        reflector,
        GEPAConfig(max_metric_calls=100, reflection_minibatch_size=4, max_idle_iterations=1),
        on_event=events.append,
    )
    rejected = [e for e in events if isinstance(e, ProposalRejected)]
    assert [r.reason for r in rejected][:2] == [RejectReason.NOT_IMPROVED] * 2
    assert [r.child_minibatch_score for r in rejected][:2] == [0.8, 2.0]
    assert result.candidates == [{"p": "seed"}, {"p": "better"}]
    assert result.parents == [(), (0,)]
    assert result.val_subscores[1] == {0: 0.75, 1: 0.75}
    # seed val 2 + seed minibatch 4 + three children's minibatches 12 + accepted child's val 2;
    # the seed's minibatch is paid once although it is re-evaluated for every proposal.
    assert result.metric_calls_used == 2 + 4 + 12 + 2
    # one adapter call per example: each holds one worker slot
    assert [c for c in adapter.calls if c[0] == "val"] == [("val", 1, False)] * 4
    assert result.history[2].candidate_idx == 1 and result.history[2].reject_reason is None


async def test_cache_hits_are_never_charged() -> None:
    events: list[GEPAEvent] = []
    result, adapter = await run_keyword_task(GEPAConfig(max_metric_calls=300, seed=2), events)
    assert len(adapter.evaluated) == len(set(adapter.evaluated)) == result.metric_calls_used
    charged = sum(e.metric_calls for e in events if isinstance(e, BudgetUsed))
    assert charged == result.metric_calls_used


async def test_perfect_parent_is_skipped_and_a_run_with_nothing_to_learn_stops() -> None:
    reflector = ScriptedReflector([])
    result = await optimize(
        {"p": " ".join(KEYWORDS)},
        tasks("train", 6),
        tasks("val", 3),
        KeywordAdapter(),
        reflector,
        GEPAConfig(max_metric_calls=1000, max_idle_iterations=5),
    )
    assert result.stop_reason is StopReason.STALLED
    assert result.rejections == {RejectReason.PERFECT_PARENT: len(result.history)}
    assert reflector.prompts == [] and result.reflection_calls == 0
    assert result.metric_calls_used == 3 + 6  # valset once, then each train example once


@pytest.mark.parametrize("reply", ["", None, "```\n```", "   "])
async def test_empty_proposals_are_rejected_and_counted(reply: str | None) -> None:
    result = await optimize(
        {"p": "Answer."},
        tasks("train", 3),
        tasks("val", 2),
        KeywordAdapter(),
        ScriptedReflector([reply] * 5),
        GEPAConfig(max_metric_calls=100, max_idle_iterations=4),
    )
    # The first proposal pays for the seed's minibatch; four free ones in a row then stall.
    assert result.stop_reason is StopReason.STALLED
    assert result.empty_proposals == result.rejected_proposals == len(result.history) == 5
    assert result.candidates == [{"p": "Answer."}]
    assert result.reflection_calls == 5


async def test_a_proposal_equal_to_its_parent_is_not_evaluated() -> None:
    adapter = KeywordAdapter()
    result = await optimize(
        {"p": "Answer."},
        tasks("train", 3),
        tasks("val", 2),
        adapter,
        ScriptedReflector(["```\nAnswer.\n```"]),
        GEPAConfig(max_metric_calls=100, max_idle_iterations=1),
    )
    assert result.history[0].reject_reason is RejectReason.UNCHANGED
    assert result.history[0].child_scores is None
    assert result.metric_calls_used == 2 + 3


async def test_a_proposal_equal_to_another_pool_candidate_is_not_evaluated() -> None:
    adapter = TableAdapter(table={"A": 0.0, "B": 0.5})
    result = await optimize(
        {"p": "A"},
        tasks("train", 3),
        tasks("val", 2),
        adapter,
        ScriptedReflector(["```\nB\n```", "```\nA\n```"]),  # B wins, then back to the seed
        GEPAConfig(max_metric_calls=100, max_idle_iterations=1, candidate_selection="current_best"),
    )
    assert result.candidates == [{"p": "A"}, {"p": "B"}]
    assert result.history[1].parent_idx == 1
    assert result.history[1].reject_reason is RejectReason.DUPLICATE
    assert result.history[1].child_scores is None


async def test_round_robin_alternates_components_of_a_parent() -> None:
    adapter = TableAdapter(table={"A": 0.0} | {f"A{'x' * n}": 0.0 for n in range(1, 9)})
    reflector = ScriptedReflector([f"```\nA{'x' * n}\n```" for n in range(1, 9)])
    events: list[GEPAEvent] = []
    await optimize(
        {"a": "A", "b": "B"},
        tasks("train", 3),
        tasks("val", 2),
        adapter,
        reflector,
        GEPAConfig(max_metric_calls=200, candidate_selection="current_best", max_idle_iterations=1),
        on_event=events.append,
    )
    started = [e for e in events if isinstance(e, ProposalStarted)]
    assert [e.parent_idx for e in started] == [0] * len(started)
    assert [e.components for e in started][:4] == [("a",), ("b",), ("a",), ("b",)]
    # Each reflection is about its own component's current text.
    assert "```\nA\n```" in reflector.prompts[0] and "```\nB\n```" in reflector.prompts[1]


async def test_all_components_use_their_own_templates() -> None:
    reflector = ScriptedReflector([])
    template = "RUBRIC <curr_instructions> <inputs_outputs_feedback>"
    result = await optimize(
        {"prompt": "Answer.", "rubric": "Grade."},
        tasks("train", 3),
        tasks("val", 2),
        KeywordAdapter(),
        reflector,
        GEPAConfig(
            module_selection="all",
            component_prompt_templates={"rubric": template},
            max_idle_iterations=1,
        ),
    )
    assert len(reflector.prompts) == 2 * len(result.history)
    assert reflector.prompts[0].startswith("I provided an assistant")
    assert reflector.prompts[1].startswith("RUBRIC Grade. # Example 1")


async def test_event_stream_tells_the_whole_story() -> None:
    events: list[GEPAEvent] = []
    result, _ = await run_keyword_task(GEPAConfig(max_metric_calls=120, seed=3), events)
    # the seed's valset pass runs beside the first group, whose proposals are announced
    # once the seed has joined the pool
    (seed_pass,) = [e for e in events if isinstance(e, BudgetUsed) and e.iteration == 0]
    assert seed_pass.metric_calls == 6
    kinds = [type(e) for e in events]
    first_front = kinds.index(FrontierChanged)
    assert events[first_front].iteration == 0 and first_front < kinds.index(ProposalStarted)
    assert events.index(seed_pass) < first_front
    assert isinstance(events[-1], Finished) and events[-1].best_idx == result.best_idx
    assert sum(isinstance(e, ProposalStarted) for e in events) == len(result.history)
    accepted = [e for e in events if isinstance(e, ProposalAccepted)]
    assert [e.candidate_idx for e in accepted] == list(range(1, len(result.candidates)))
    assert sum(isinstance(e, ProposalRejected) for e in events) == result.rejected_proposals
    finished = [e for e in events if isinstance(e, ProposalFinished)]
    assert [(e.iteration, e.candidate_idx, e.reject_reason, e.metric_calls) for e in finished] == [
        (r.iteration, r.candidate_idx, r.reject_reason, r.metric_calls) for r in result.history
    ]
    # budget events of the seed's valset + what every proposal says it paid = calls used
    assert seed_pass.metric_calls + sum(e.metric_calls for e in finished) == (
        result.metric_calls_used
    )
    assert all(e.seconds > 0 for e in finished)


async def test_async_event_handlers_are_awaited() -> None:
    seen: list[str] = []

    async def handler(event: GEPAEvent) -> None:
        await asyncio.sleep(0)
        seen.append(type(event).__name__)

    await optimize(
        {"p": "Answer."},
        tasks("train", 3),
        tasks("val", 2),
        KeywordAdapter(),
        ScriptedReflector([]),
        GEPAConfig(max_idle_iterations=1),
        on_event=[handler],
    )
    assert seen[-1] == "Finished"


async def test_bad_inputs_are_named() -> None:
    with pytest.raises(ValueError, match="seed's valset evaluation"):
        await optimize(
            {"p": "x"}, tasks("train", 3), tasks("val", 5), KeywordAdapter(),
            ScriptedReflector([]), GEPAConfig(max_metric_calls=4),
        )  # fmt: skip
    with pytest.raises(ValueError, match=r"trainset\[1\]: example id 'same'"):
        await optimize(
            {"p": "x"}, tasks("train", 3), None, KeywordAdapter(), ScriptedReflector([]),
            example_id=lambda t: "same",
        )  # fmt: skip
    template = "<curr_instructions> <inputs_outputs_feedback>"
    with pytest.raises(ValueError, match="unknown components"):
        await optimize(
            {"p": "x"}, tasks("train", 3), None, KeywordAdapter(), ScriptedReflector([]),
            GEPAConfig(component_prompt_templates={"q": template}),
        )  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(
    budget=st.integers(1, 150),
    minibatch=st.integers(1, 5),
    n_train=st.integers(1, 8),
    n_val=st.integers(1, 6),
    concurrency=st.integers(1, 16),
    shape=st.sampled_from(["1x1", "2x2", "4x2", "8x1"]),
    merge=st.booleans(),
    seed=st.integers(0, 3),
)
def test_budget_is_never_exceeded(
    budget: int,
    minibatch: int,
    n_train: int,
    n_val: int,
    concurrency: int,
    shape: str,
    merge: bool,
    seed: int,
) -> None:
    adapter = KeywordAdapter(delay_s=0.0001)  # varied completion order
    config = GEPAConfig(
        max_metric_calls=budget,
        reflection_minibatch_size=minibatch,
        max_concurrency=concurrency,
        proposal_shape=shape,
        use_merge=merge,
        seed=seed,
        max_idle_iterations=3,
    )
    run = optimize(
        {"p": "Answer."}, tasks("train", n_train), tasks("val", n_val), adapter,
        KeywordReflector(), config,
    )  # fmt: skip
    if budget < n_val:
        with pytest.raises(ValueError):
            asyncio.run(run)
        assert adapter.evaluated == []
        return
    result = asyncio.run(run)
    assert result.metric_calls_used <= budget
    # no (candidate, split, example) pair paid twice, even when proposals ran side by side
    assert len(adapter.evaluated) == len(set(adapter.evaluated)) == result.metric_calls_used
    assert adapter.most_in_flight <= concurrency
    if not merge:  # a merge's calls are not in a proposal's record
        assert sum(r.metric_calls for r in result.history) + n_val == result.metric_calls_used
    if result.stop_reason is StopReason.BUDGET:
        # Stopped only because a whole proposal (minibatches and a valset) no longer fits.
        assert budget - result.metric_calls_used < 2 * min(minibatch, n_train) + n_val


async def test_score_target_ends_the_run_early() -> None:
    config = GEPAConfig(max_metric_calls=400, seed=1, stop=StopRules(score_target=0.5))
    result, _ = await run_keyword_task(config)
    assert result.stop_reason is StopReason.SCORE_TARGET
    assert 0.5 <= result.best_score < 1.0  # stopped as soon as the target was met
    assert result.metric_calls_used < 400


async def test_a_stop_file_present_at_start_starts_no_proposal(tmp_path) -> None:
    (tmp_path / "STOP").touch()
    config = GEPAConfig(max_metric_calls=400, stop=StopRules(stop_file=tmp_path / "STOP"))
    result, _ = await run_keyword_task(config)
    assert result.stop_reason is StopReason.STOP_FILE
    assert result.history == [] and result.metric_calls_used == 6  # the seed's valset only


async def test_token_budget_reads_the_callers_usage() -> None:
    reflector = KeywordReflector()

    def usage() -> LMUsage:  # pretend every reflection cost 1,000 prompt tokens
        return LMUsage(prompt_tokens=1000 * len(reflector.prompts))

    result = await optimize(
        {"instructions": "Answer."}, tasks("train", 12), tasks("val", 6), KeywordAdapter(),
        reflector, GEPAConfig(max_metric_calls=400, stop=StopRules(max_tokens=3000)),
        usage=usage,
    )  # fmt: skip
    assert result.stop_reason is StopReason.TOKENS
    assert len(reflector.prompts) == 3  # checked after each proposal: the third crossed it


async def test_no_improvement_for_k_proposals() -> None:
    result = await optimize(
        {"p": "Answer."}, tasks("train", 6), tasks("val", 3), KeywordAdapter(),
        ScriptedReflector(["```\nAnswer. nothing\n```"] * 50),
        GEPAConfig(max_metric_calls=400, stop=StopRules(max_proposals_without_improvement=4)),
    )  # fmt: skip
    assert result.stop_reason is StopReason.NO_IMPROVEMENT
    assert len(result.history) == 4


def test_auto_shape_widens_with_the_worker_pool() -> None:
    def shape(workers: int) -> ProposalShape:
        config = GEPAConfig(proposal_shape="auto", max_concurrency=workers)
        return GEPAEngine(
            {"p": "x"}, tasks("train", 6), tasks("val", 6), KeywordAdapter(), KeywordReflector(),
            config,
        ).shape  # fmt: skip

    assert shape(1) == ProposalShape(1, 1)
    assert shape(16).width > 1


async def test_merges_combine_two_lineages_beside_mutations() -> None:
    events: list[GEPAEvent] = []
    adapter = KeywordAdapter()
    config = GEPAConfig(
        max_metric_calls=300, use_merge=True, max_merge_invocations=2, proposal_shape="2x1",
        max_concurrency=4,
    )  # fmt: skip
    result = await optimize(
        {"a": "Answer.", "b": "Be kind."}, tasks("train", 12), tasks("val", 6), adapter,
        KeywordReflector(), config, on_event=events.append,
    )  # fmt: skip
    merges = [e for e in events if isinstance(e, MergeTried)]
    assert 1 <= len(merges) <= 2
    admitted = [m for m in merges if m.candidate_idx is not None]
    assert admitted and result.merged_candidates == len(admitted)
    for m in admitted:
        merged = result.candidates[m.candidate_idx]
        assert result.parents[m.candidate_idx] == (m.i, m.j)
        assert m.subsample_score >= m.parents_best_subsample_score
        sides = [result.candidates[k] for k in (m.i, m.j, m.ancestor)]
        assert all(merged[c] in {side[c] for side in sides} for c in merged)
        assert merged not in sides
    assert len(adapter.evaluated) == len(set(adapter.evaluated)) == result.metric_calls_used
