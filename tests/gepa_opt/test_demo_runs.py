"""GEPA runs with a demonstrations component (`gepa_opt.Demonstrations`): it is changed from
its pool with no reflection call, takes its turns beside reflected components under every
module selection, and replays and resumes like any other component."""

from dataclasses import dataclass, field
from typing import Any

import pytest

from gepa_opt import (
    BudgetUsed,
    Demo,
    Demonstrations,
    EvaluationBatch,
    GEPAConfig,
    GEPAEvent,
    ProposalAccepted,
    ProposalStarted,
    RejectReason,
    StopReason,
    optimize,
)
from gepa_opt.journal import CallJournal
from gepa_opt.types import Candidate

TEMPLATES = {
    "music": ["play some songs by {}", "play the album of {}", "put on music by {}"],
    "weather": ["weather forecast for {}", "will it rain in {}", "how cold is it in {}"],
    "restaurant": ["book a table at {}", "reserve a table for dinner at {}", "book dinner at {}"],
}
NAMES = ["oslo", "lima", "kyoto", "adele", "muse", "nile", "quito", "bern", "rome"]


@dataclass(frozen=True)
class Ask:
    split: str
    id: int
    request: str
    kind: str


def asks(split: str, n: int, offset: int = 0) -> list[Ask]:
    kinds = list(TEMPLATES)
    out = []
    for i in range(n):
        kind = kinds[i % 3]
        template = TEMPLATES[kind][(i // 3 + offset) % 3]
        out.append(Ask(split, i, template.format(NAMES[(i + offset) % len(NAMES)]), kind))
    return out


TRAIN, VAL = asks("train", 18), asks("val", 6, offset=1)
POOL = tuple(Demo(a.request, f"{a.request} => {a.kind}") for a in TRAIN)
SEED = {"instructions": "Route the request.", "examples": "hello there => greeting"}


def shows(candidate: Candidate, kind: str) -> bool:
    """Whether the candidate teaches `kind`: a demonstration of it, or its instructions
    naming it."""
    demos = candidate.get("examples", "").splitlines()
    return any(line.endswith(f"=> {kind}") for line in demos) or kind in candidate.get(
        "instructions", ""
    )


@dataclass
class RouteAdapter:
    """Scores 1 where the candidate teaches the example's kind; the feedback names it."""

    calls: list[tuple[str, int]] = field(default_factory=list)
    stop_at: int | None = None
    """Raise `Stopped` at this call (a kill, its calls journaled)."""

    async def evaluate(
        self, batch: list[Ask], candidate: Candidate, capture_traces: bool = False
    ) -> EvaluationBatch:
        self.calls.extend((a.split, a.id) for a in batch)
        if self.stop_at is not None and len(self.calls) >= self.stop_at:
            raise Stopped
        hits = [shows(candidate, a.kind) for a in batch]
        return EvaluationBatch(
            outputs=["ok" if h else "?" for h in hits],
            scores=[float(h) for h in hits],
            trajectories=[{"kind": a.kind} for a in batch] if capture_traces else None,
        )

    async def make_reflective_dataset(
        self, candidate: Candidate, eval_batch: EvaluationBatch, components: list[str]
    ) -> dict[str, list[dict[str, Any]]]:
        assert eval_batch.trajectories is not None
        records = [
            {"Inputs": "a request", "Feedback": f"must mention '{t['kind']}'"}
            for t in eval_batch.trajectories
        ]
        return {c: records for c in components}


class BlamingAdapter(RouteAdapter):
    """Its feedback always blames the instructions."""

    async def blame(self, candidate: Candidate, eval_batch: EvaluationBatch) -> dict[str, float]:
        return {"instructions": 1.0}


class Stopped(Exception):
    """A stand-in for a kill."""


@dataclass
class NamingReflector:
    """Adds to the instructions the first kind the feedback asks for; refuses to be asked
    about demonstrations."""

    prompts: list[str] = field(default_factory=list)

    async def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        assert "=> greeting" not in prompt, "a reflection on the demonstrations"
        current = prompt.split("```\n", 1)[1].split("\n```", 1)[0]
        wanted = [k for k in TEMPLATES if f"'{k}'" in prompt and k not in current]
        return f"```\n{current} {wanted[0]}\n```" if wanted else ""


async def never_called(prompt: str) -> str:
    raise AssertionError("a reflection call")


def demos(**kwargs) -> Demonstrations:
    return Demonstrations("examples", POOL, request_of=lambda a: a.request, **kwargs)


async def run(
    seed: Candidate,
    config: GEPAConfig,
    adapter: RouteAdapter | None = None,
    reflector=never_called,
    demonstrations: Demonstrations | None = None,
    events: list[GEPAEvent] | None = None,
):
    return await optimize(
        seed,
        TRAIN,
        VAL,
        adapter or RouteAdapter(),
        reflector,
        config,
        example_id=lambda a: a.id,
        on_event=None if events is None else events.append,
        demonstrations=demonstrations or demos(),
    )


def lines(text: str) -> int:
    return len(text.splitlines())


async def test_the_demonstrations_come_from_the_pool_with_no_reflection_call() -> None:
    events: list[GEPAEvent] = []
    result = await run(
        {"examples": SEED["examples"]}, GEPAConfig(max_metric_calls=60), events=events
    )
    assert result.reflection_calls == 0
    assert all(e.reflection_calls == 0 for e in events if isinstance(e, BudgetUsed))
    assert result.best_score == 1.0
    pool = {d.text for d in POOL} | {SEED["examples"]}
    for candidate in result.candidates:
        assert set(candidate["examples"].splitlines()) <= pool


async def test_they_swap_to_stay_within_the_budget() -> None:
    budget = demos(max_tokens=2, count_tokens=lines)
    config = GEPAConfig(max_metric_calls=150, reflection_minibatch_size=4)
    result = await run({"examples": SEED["examples"]}, config, demonstrations=budget)
    assert all(lines(c["examples"]) <= 2 for c in result.candidates)
    shown = [set(c["examples"].splitlines()) for c in result.candidates]
    # some child dropped a demonstration its parent showed
    assert any(p and shown[p[0]] - shown[k] for k, p in enumerate(result.parents))


async def test_a_proposal_equal_to_its_parent_is_not_evaluated() -> None:
    unlike = Demonstrations(
        "examples", (Demo("zzz", "zzz => music"),), request_of=lambda a: a.request
    )
    config = GEPAConfig(max_metric_calls=60, max_idle_iterations=3)
    result = await run({"examples": SEED["examples"]}, config, demonstrations=unlike)
    assert result.stop_reason is StopReason.STALLED
    assert set(result.rejections) == {RejectReason.UNCHANGED}
    assert all(r.child_scores is None for r in result.history)
    # the seed's valset pass and minibatches, never a child's
    assert result.metric_calls_used == len(VAL) + sum(r.metric_calls for r in result.history)
    assert result.candidates == [{"examples": SEED["examples"]}]


async def test_the_caller_says_what_passes() -> None:
    everything = demos(passes=lambda score: True)  # nothing failed: nothing to add
    config = GEPAConfig(max_metric_calls=60, max_idle_iterations=3)
    result = await run({"examples": SEED["examples"]}, config, demonstrations=everything)
    assert set(result.rejections) == {RejectReason.UNCHANGED}


@pytest.mark.parametrize("selection", ["round_robin", "blamed", "all"])
async def test_reflected_instructions_and_demonstrations_both_get_turns(selection) -> None:
    reflector = NamingReflector()
    adapter = BlamingAdapter()
    config = GEPAConfig(max_metric_calls=200, module_selection=selection, skip_perfect_score=False)
    events: list[GEPAEvent] = []
    result = await run(SEED, config, adapter, reflector, events=events)
    started = [e.components for e in events if isinstance(e, ProposalStarted)]
    turns = {c for components in started for c in components}
    assert turns == {"instructions", "examples"}
    # one reflection per instructions turn that reached reflection, none for demonstrations
    assert result.reflection_calls == len(reflector.prompts) > 0
    changed = {
        c
        for k, parents in enumerate(result.parents)
        if parents
        for c in SEED
        if result.candidates[k][c] != result.candidates[parents[0]][c]
    }
    assert changed == {"instructions", "examples"}


async def test_a_lineage_of_winners_alternates_its_components() -> None:
    config = GEPAConfig(max_metric_calls=200, candidate_selection="current_best")
    events: list[GEPAEvent] = []
    await run(SEED, config, RouteAdapter(), NamingReflector(), events=events)
    started = [e for e in events if isinstance(e, ProposalStarted)]
    accepted = [e for e in events if isinstance(e, ProposalAccepted)]
    # each winner's first proposal takes the component after the one that made it
    firsts = [
        (winner, min((e for e in started if e.parent_idx == winner.candidate_idx), key=iteration))
        for winner in accepted
        if any(e.parent_idx == winner.candidate_idx for e in started)
    ]
    assert len(firsts) >= 2
    for winner, first in firsts:
        assert first.components != winner.components


def iteration(event: ProposalStarted) -> int:
    return event.iteration


async def test_the_same_seed_replays_the_same_run() -> None:
    config = dict(max_metric_calls=120, seed=5)
    first = await run(SEED, GEPAConfig(**config), RouteAdapter(), NamingReflector())
    again = await run(SEED, GEPAConfig(**config), RouteAdapter(), NamingReflector())
    assert first.candidates == again.candidates and first.history == again.history


async def test_a_run_stopped_after_a_demonstration_was_drawn_resumes_to_the_same_pool(
    tmp_path,
) -> None:
    config, seed = dict(max_metric_calls=120, seed=2), {"examples": SEED["examples"]}
    whole = await run(seed, GEPAConfig(**config, run_dir=str(tmp_path / "whole")))
    journal = (tmp_path / "whole" / "calls.jsonl").read_text().splitlines()
    drawn = next(k for k, line in enumerate(journal) if "demonstrated" in line)
    # stop on the second call of that child's minibatch: its text is journaled, unjudged
    stop_at = sum('"paid"' in line for line in journal[:drawn]) + 2
    run_dir = str(tmp_path / "stopped")
    with pytest.raises((Stopped, ExceptionGroup)):  # raised in a group's task, or not
        await run(seed, GEPAConfig(**config, run_dir=run_dir), RouteAdapter(stop_at=stop_at))
    replayed = CallJournal(tmp_path / "stopped" / "calls.jsonl").replay(0)
    assert replayed.demonstrations and not replayed.reflections  # no reflection was made
    resumed = await run(seed, GEPAConfig(**config, run_dir=run_dir))
    assert resumed.candidates == whole.candidates
    outcomes = [(r.iteration, r.components, r.reject_reason) for r in whole.history]
    assert [(r.iteration, r.components, r.reject_reason) for r in resumed.history] == outcomes
    assert resumed.reflection_calls == whole.reflection_calls == 0
    # what was paid and unanswered at the stop counts too, never above the budget
    assert whole.metric_calls_used <= resumed.metric_calls_used <= 120


def test_the_component_must_be_the_seed_s_and_have_no_template() -> None:
    with pytest.raises(ValueError, match="Demonstrations.component 'shots'"):
        optimize_now({"instructions": "x"}, Demonstrations("shots", POOL))
    config = GEPAConfig(
        component_prompt_templates={"examples": "<curr_instructions> <inputs_outputs_feedback>"}
    )
    with pytest.raises(ValueError, match=r"component_prompt_templates\['examples'\]"):
        optimize_now(SEED, demos(), config)


def optimize_now(seed: Candidate, demonstrations: Demonstrations, config=None) -> None:
    from gepa_opt import GEPAEngine

    GEPAEngine(
        seed, TRAIN, VAL, RouteAdapter(), never_called, config or GEPAConfig(),
        demonstrations=demonstrations,
    )  # fmt: skip
