"""The fast-slow schedule: its parsing, its budget split, the held-out split it chooses on,
and the runner's rule: a step that does not improve is dropped and the next one starts
from the best state so far."""

from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from flows.night.clock import StageClock
from flows.night.collect import Collected
from flows.night.fast_slow import (
    NightState,
    decide_step,
    paired_gain,
    prompt_budget,
    split_heldout,
    weight_budget,
)
from flows.night.schedule import Schedule, StepTasks
from flows.night.stages import Evaluation, PromptStage
from infra.settings import AgentOptSettings, LoraSettings, Settings, parse_schedule
from infra.types import Example
from judges.metrics import Estimate
from weights.round import LoraRound, ServedAdapter


def test_a_schedule_reads_as_bettertogether_writes_it():
    assert parse_schedule("p -> w -> p") == ("p", "w", "p")
    assert parse_schedule("w") == ("w",)
    with pytest.raises(ValueError, match=r"step 2 is 'x'.*\"p\" \(prompts\)"):
        parse_schedule("p -> x")
    with pytest.raises(ValidationError, match="fast_slow.schedule 'p w'"):
        Settings(fast_slow={"schedule": "p w"})


def test_the_nights_budget_is_split_evenly_across_steps_of_a_kind():
    kinds = parse_schedule("p -> w -> p -> w")
    cfg = AgentOptSettings(max_metric_calls=301, max_reflection_calls=11)
    first, second = (prompt_budget(cfg, kinds, k) for k in (0, 1))
    assert (first.max_metric_calls, second.max_metric_calls) == (151, 150)
    assert (first.max_reflection_calls, second.max_reflection_calls) == (6, 5)
    lora = LoraSettings(max_steps=5)
    assert [weight_budget(lora, kinds, k).max_steps for k in (0, 1)] == [3, 2]
    assert [weight_budget(LoraSettings(), kinds, k).max_steps for k in (0, 1)] == [10, 10]
    unbounded = LoraSettings(max_steps=None)
    assert weight_budget(unbounded, kinds, 0).max_steps is None  # epochs decide


def test_the_selection_slice_is_seeded_and_apart_from_the_gates():
    examples = [Example(f"e{i}", {"request": str(i)}, "x") for i in range(21)]
    selection, gate = split_heldout(examples, 0.5, seed=3)
    assert len(selection) == 10 and len(gate) == 11
    assert not {e.id for e in selection} & {e.id for e in gate}
    again, _ = split_heldout(list(reversed(examples)), 0.5, seed=3)
    assert [e.id for e in again] == [e.id for e in selection]  # ids and seed decide
    other, _ = split_heldout(examples, 0.5, seed=4)
    assert {e.id for e in other} != {e.id for e in selection}
    assert split_heldout(examples[:1], 0.5, 0) == ([], examples[:1])


def test_a_step_is_kept_only_above_the_best_by_the_margin():
    on = "the slice"
    assert decide_step(0.4, 0.45, on, 0.0, 0, "").kept
    tie = decide_step(0.4, 0.4, on, 0.0, 0, "")
    assert not tie.kept and "not above 0.400; the night goes on from step 0" in tie.reason
    small = decide_step(0.4, 0.42, on, 0.05, 2, "")
    assert not small.kept and "+ fast_slow.min_step_gain 0.05" in small.reason
    nothing = decide_step(0.4, None, on, 0.0, 1, "no adapter was trained")
    assert not nothing.kept and nothing.reason.startswith("dropped: no adapter was trained")


def test_a_step_whose_gain_is_inside_the_noise_is_not_kept():
    """A +0.043 mean on the slice is kept only when its paired interval excludes zero."""
    on = "the slice"
    noisy = Estimate(0.043, -0.029, 0.114)
    inside = decide_step(0.271, 0.314, on, 0.0, 0, "", noisy)
    assert not inside.kept and "a gain inside the noise" in inside.reason
    assert "paired gain +0.043 [-0.029, 0.114]" in inside.reason
    assert decide_step(0.271, 0.571, on, 0.0, 0, "", Estimate(0.3, 0.2, 0.4)).kept
    assert not decide_step(0.271, 0.314, on, 0.0, 0, "", Estimate(0.043, None, None)).kept


def test_a_step_s_gain_is_paired_over_the_examples_both_were_scored_on():
    before = Evaluation(4, 0.25, 0.0, scores={"a": 1.0, "b": 0.0, "c": 0.0, "d": 0.0})
    all_right = Evaluation(4, 1.0, 0.0, scores={"a": 1.0, "b": 1.0, "c": 1.0, "d": 1.0})
    gain = paired_gain(before, all_right)
    assert gain.value == pytest.approx(0.75) and gain.low > 0
    # one example more or less right is not evidence: the interval reaches zero
    one_more = Evaluation(3, 0.67, 0.0, scores={"a": 1.0, "b": 1.0, "c": 0.0})
    assert paired_gain(before, one_more).low <= 0
    assert paired_gain(before, Evaluation(0, None, 0.0)) is None


class FakeSteps:
    """Steps with scripted outcomes. The selection score of a state is a function of its
    prompts and adapter: prompts "p1" add 0.2, the adapter of step 2 loses 0.1."""

    def __init__(self):
        self.started: list[tuple[int, NightState]] = []
        self.budgets: dict[int, int] = {}
        self.fronts: dict[int, object] = {}

    def tasks(self) -> StepTasks:
        return StepTasks(self.prompts, self.weights, self.evaluate)

    async def prompts(self, rt, run_id, step, collected, start, judge, cfg, weighted=()):
        self.started.append((step, start))
        self.weighted = weighted
        self.budgets[step] = cfg.max_metric_calls
        new = {"instructions": "p1"} if step == 1 else dict(start.prompts)
        front = [(new, 3), ({"instructions": "runner-up"}, 1)]
        return PromptStage(new, 0.3, 0.5, cfg.max_metric_calls, 2, 4, front=front)

    async def weights(self, rt, run_id, step, collected, start, judge, cfg, front, selection):
        self.started.append((step, start))
        self.fronts[step] = front
        return LoraRound(f"/runs/{run_id}/lora-step{step}/adapter", True, 8, 1.2, 0.4, 0.45)

    async def evaluate(self, rt, run_id, label, state, judge, examples):
        score = 0.4 + 0.2 * (state.prompts.get("instructions") == "p1")
        score -= 0.1 * (state.adapter is not None and state.adapter.name.endswith("step2"))
        scores = {e.id: score for e in examples}
        return Evaluation(len(examples), score, score, scores=scores, by_labels=True)


class ServingLM:
    """Records the adapters the schedule stops serving."""

    def __init__(self):
        self.unloaded: list[str] = []

    async def unload_adapter(self, name):
        self.unloaded.append(name)


TRACES = Collected([Example("t1", {"request": "play jazz"})], [])  # the night's, to learn from


def schedule(
    steps: FakeSteps, selection: list[Example], night: Collected = TRACES, **fast_slow
) -> Schedule:
    settings = Settings(agent_opt={"max_metric_calls": 100}, fast_slow=fast_slow)
    rt = SimpleNamespace(settings=settings, lm=ServingLM())
    start = NightState({"instructions": "seed"}, None)
    return Schedule(rt, "n1", StageClock(), night, None, selection, start, tasks=steps.tasks())


HELDOUT = [Example(f"h{i}", {"request": str(i)}, "x") for i in range(6)]


async def test_a_step_that_does_not_improve_is_dropped_and_the_next_starts_from_the_best():
    steps = FakeSteps()
    run = schedule(steps, HELDOUT, schedule="p -> w -> p", fst=True)
    done = await run.run()

    assert [s.decision.kept for s in done] == [True, False, False]
    assert done[0].decision.before == pytest.approx(0.4)
    assert done[0].decision.after == pytest.approx(0.6)
    assert done[1].decision.after == pytest.approx(0.5)  # the adapter lost 0.1
    assert "the night goes on from step 1" in done[1].decision.reason
    # step 3 starts from step 1's state: its prompts, without step 2's adapter
    step3_start = dict(steps.started)[3]
    assert step3_start == NightState({"instructions": "p1"}, None, 1)
    assert done[2].started_from == 1 and done[2].decision.after is None  # nothing new
    assert run.best == NightState({"instructions": "p1"}, None, 1)
    assert steps.budgets == {1: 50, 3: 50}  # the night's metric calls, split
    # FST: the weight step drew from the kept prompt step's front
    assert steps.fronts[2] == [({"instructions": "p1"}, 3), ({"instructions": "runner-up"}, 1)]
    assert done[1].fst and done[1].prompts == {"instructions": "p1"}
    assert run.rt.lm.unloaded == ["adapter-n1-step2"]  # the dropped step's adapter, freed


async def test_a_kept_weight_step_carries_its_adapter_into_the_next_step():
    steps = FakeSteps()

    async def better(rt, run_id, label, state, judge, examples):
        score = 0.4 + 0.1 * (state.adapter is not None)
        return Evaluation(len(examples), score, score, {e.id: score for e in examples})

    steps.evaluate = better
    run = schedule(steps, HELDOUT, schedule="w -> p")
    done = await run.run()
    assert done[0].decision.kept and not done[0].fst  # no prompt step before it: no front
    adapter = ServedAdapter("adapter-n1-step1", "/runs/n1/lora-step1/adapter")
    assert dict(steps.started)[2] == NightState({"instructions": "seed"}, adapter, 1)


async def test_without_held_out_examples_steps_are_chosen_on_their_pareto_set():
    steps = FakeSteps()
    done = await schedule(steps, [], schedule="p -> w").run()
    assert done[0].decision.before == 0.3 and done[0].decision.after == 0.5  # GEPA's val
    assert done[1].decision.before == 0.4 and done[1].decision.after == 0.45  # the round's
    assert all(s.decision.kept for s in done)
    assert "the Pareto set" in done[0].decision.on and done[0].selection is None


async def test_with_no_traces_in_the_window_every_step_is_skipped_and_says_why():
    """GEPA raised 'trainset is empty' on a night whose window held no trace (a quiet day)."""
    steps = FakeSteps()
    run = schedule(steps, HELDOUT, Collected([], []), schedule="p -> w")
    done = await run.run()
    assert steps.started == []  # neither GEPA nor a LoRA round ran, nothing was evaluated
    assert [s.kind for s in done] == ["p", "w"] and not any(s.decision.kept for s in done)
    reasons = {s.decision.reason for s in done}
    assert reasons == {"not run: no traces in the night's window to learn from"}
    assert run.best == NightState({"instructions": "seed"}, None)  # production, untouched
