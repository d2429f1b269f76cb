"""Multi-objective frontiers (GEPAConfig.frontier): over instances, objectives, or both."""

import random
from collections import Counter
from dataclasses import dataclass, field

import pytest

from gepa_opt import EvaluationBatch, FrontierChanged, GEPAConfig, GEPAEvent, optimize
from gepa_opt.budget import Budget
from gepa_opt.cache import CachedEvaluation, EvaluationCache, Split
from gepa_opt.pareto import Objective, frontier_scores, objective_means, win_counts
from gepa_opt.persistence import RunStore
from gepa_opt.selection import ParetoSelector
from gepa_opt.snapshot import restore, snapshot_of
from gepa_opt.state import GEPAState
from gepa_opt.types import Candidate, candidate_digest
from tests.gepa_opt.test_engine import KeywordAdapter, KeywordReflector, Task, tasks

# Worked by hand: two val instances, two objectives (accuracy = the instance score).
#   instance scores          accuracy mean   brevity mean
#   c0: {0: 1.0, 1: 0.2}     0.6             0.9
#   c1: {0: 0.2, 1: 1.0}     0.6             0.1
#   c2: {0: 0.8, 1: 0.8}     0.8             0.5
#   instances:  P*[0] = {c0}, P*[1] = {c1}; c2 is best nowhere -> f = {c0: 1, c1: 1}
#   objectives: P*[accuracy] = {c2}, P*[brevity] = {c0}; c1 (0.6, 0.1) is dominated by c2
#               (and c0) but on no front anyway -> f = {c0: 1, c2: 1}
#   both:       keys 0, 1, accuracy, brevity; no vector dominates another
#               -> f = {c0: 2 (0, brevity), c1: 1 (1), c2: 1 (accuracy)}
INSTANCES = [{0: 1.0, 1: 0.2}, {0: 0.2, 1: 1.0}, {0: 0.8, 1: 0.8}]
BREVITY = [0.9, 0.1, 0.5]
OBJECTIVES = [
    {i: {"accuracy": score, "brevity": brevity} for i, score in scores.items()}
    for scores, brevity in zip(INSTANCES, BREVITY, strict=True)
]


def test_objective_means_are_per_name_valset_means() -> None:
    assert objective_means(OBJECTIVES[2]) == pytest.approx({"accuracy": 0.8, "brevity": 0.5})
    assert objective_means({}) == {}


def test_best_on_an_objective_but_no_instance_is_on_the_objectives_front_only() -> None:
    assert win_counts(frontier_scores(INSTANCES, OBJECTIVES, "instances")) == {0: 1, 1: 1}
    objectives = frontier_scores(INSTANCES, OBJECTIVES, "objectives")
    assert set(objectives[2]) == {Objective("accuracy"), Objective("brevity")}
    assert win_counts(objectives) == {0: 1, 2: 1}


def test_both_frontier_has_instance_and_objective_keys() -> None:
    both = frontier_scores(INSTANCES, OBJECTIVES, "both")
    assert set(both[0]) == {0, 1, Objective("accuracy"), Objective("brevity")}
    assert win_counts(both) == {0: 2, 1: 1, 2: 1}


def test_an_objective_named_like_an_example_id_is_a_separate_key() -> None:
    scores = [{"speed": 0.0}, {"speed": 1.0}]
    objectives = [{"speed": {"speed": 1.0}}, {"speed": {"speed": 0.0}}]
    assert win_counts(frontier_scores(scores, objectives, "both")) == {0: 1, 1: 1}


def test_sampling_is_proportional_to_objectives_won() -> None:
    # c0 is best on a and b, c1 on c; c2 is on no front (and dominated by c0).
    objectives = [
        {0: {"a": 1.0, "b": 0.9, "c": 0.1}},
        {0: {"a": 0.0, "b": 0.2, "c": 0.8}},
        {0: {"a": 0.5, "b": 0.5, "c": 0.0}},
    ]
    instances = [{0: 0.0}, {0: 0.0}, {0: 1.0}]  # c2 would be the only parent per instance
    frontier = frontier_scores(instances, objectives, "objectives")
    assert win_counts(frontier) == {0: 2, 1: 1}
    rng = random.Random(99)
    draws = Counter(ParetoSelector().select(instances, rng, frontier) for _ in range(9_000))
    assert set(draws) == {0, 1}
    assert draws[0] / 9_000 == pytest.approx(2 / 3, abs=0.02)
    assert ParetoSelector().select(instances, rng) == 2  # no frontier: per instance


@dataclass
class ObjectiveAdapter(KeywordAdapter):
    """KeywordAdapter plus two named objectives: accuracy (the score) and brevity
    (shorter instructions score higher). `drop` leaves an objective out for one val id."""

    drop: tuple[int, str] | None = None
    no_objectives: bool = False
    objective_batches: list[int] = field(default_factory=list)

    async def evaluate(
        self, batch: list[Task], candidate: Candidate, capture_traces: bool = False
    ) -> EvaluationBatch:
        result = await super().evaluate(batch, candidate, capture_traces)
        if self.no_objectives:
            return result
        brevity = 1.0 / (1.0 + len(" ".join(candidate.values())) / 50)
        objectives = []
        for task, score in zip(batch, result.scores, strict=True):
            row = {"accuracy": score, "brevity": brevity}
            if self.drop is not None and (task.split, task.id) == ("val", self.drop[0]):
                del row[self.drop[1]]
            objectives.append(row)
        return EvaluationBatch(result.outputs, result.scores, result.trajectories, objectives)


async def run(config: GEPAConfig, adapter: KeywordAdapter, events: list[GEPAEvent] | None = None):
    return await optimize(
        {"instructions": "Answer the question."},
        tasks("train", 12),
        tasks("val", 6),
        adapter,
        KeywordReflector(),
        config,
        on_event=None if events is None else events.append,
    )


@pytest.mark.parametrize("frontier", ["instances", "objectives", "both"])
async def test_a_run_completes_with_each_frontier(frontier: str) -> None:
    events: list[GEPAEvent] = []
    config = GEPAConfig(max_metric_calls=150, seed=3, frontier=frontier)
    result = await run(config, ObjectiveAdapter(), events)
    assert result.metric_calls_used <= 150
    assert len(result.candidates) > 1 and result.best_score > result.val_aggregate_scores[0]
    assert result.best_idx == max(
        range(len(result.candidates)), key=lambda k: (result.val_aggregate_scores[k], -k)
    )  # still the mean per-instance score
    for means, aggregate in zip(
        result.val_objective_scores, result.val_aggregate_scores, strict=True
    ):
        assert set(means) == {"accuracy", "brevity"}
        assert means["accuracy"] == pytest.approx(aggregate)
    fronts = [e for e in events if isinstance(e, FrontierChanged)]
    assert fronts and fronts[-1].pareto_candidates  # from the chosen frontier, never empty
    # the seed is the shortest text, so it keeps the brevity key but wins no instance
    assert (0 in fronts[-1].pareto_candidates) == (frontier != "instances")
    assert all(k < len(result.candidates) for e in fronts for k in e.pareto_candidates)


async def test_instances_frontier_ignores_objectives() -> None:
    """Objective scores reported but frontier="instances": exactly the run without them."""
    config = GEPAConfig(max_metric_calls=150, seed=3)
    with_objectives = await run(config, ObjectiveAdapter())
    without = await run(config, ObjectiveAdapter(no_objectives=True))
    assert with_objectives.candidates == without.candidates
    assert with_objectives.val_subscores == without.val_subscores
    assert with_objectives.history == without.history
    assert without.val_objective_scores == [{}] * len(without.candidates)


async def test_a_missing_objective_is_named_with_its_example() -> None:
    adapter = ObjectiveAdapter(drop=(4, "brevity"))
    with pytest.raises(ValueError, match=r"valset example 4: .*lack objective 'brevity'"):
        await run(GEPAConfig(max_metric_calls=150, frontier="objectives"), adapter)


async def test_no_objectives_at_all_is_refused_for_an_objective_frontier() -> None:
    adapter = ObjectiveAdapter(no_objectives=True)
    with pytest.raises(ValueError, match=r"valset example 0 has no objective_scores"):
        await run(GEPAConfig(max_metric_calls=150, frontier="both"), adapter)
    await run(GEPAConfig(max_metric_calls=150), ObjectiveAdapter(no_objectives=True))


def test_unknown_frontier_is_refused() -> None:
    with pytest.raises(ValueError, match="GEPAConfig.frontier"):
        GEPAConfig(frontier="cartesian")  # type: ignore[arg-type]


def test_objective_scores_survive_a_save_and_load(tmp_path) -> None:
    seed, child = {"system": "a"}, {"system": "ab"}
    state = GEPAState()
    state.add(seed, (), {0: 1.0, "q": 0.0}, {0: {"acc": 1.0, "len": 0.5}, "q": {"acc": 0.0}})
    state.add(child, (0,), {0: 1.0, "q": 1.0})  # no objectives: stays {}
    cache = EvaluationCache()
    cache.put(candidate_digest(seed), Split.VAL, 0, CachedEvaluation("x", 1.0, None, {"acc": 1.0}))
    cache.put(candidate_digest(child), Split.VAL, "q", CachedEvaluation("y", 1.0, None))
    snapshot = snapshot_of(state, Budget(10), cache, {})
    RunStore(tmp_path).save(snapshot)

    loaded = RunStore(tmp_path).load()

    assert loaded == snapshot
    state2, _, cache2, _ = restore(loaded)
    assert state2 == state
    assert state2.val_objective_scores[0]["q"] == {"acc": 0.0}
    assert cache2.get(candidate_digest(seed), Split.VAL, 0).objective_scores == {"acc": 1.0}
    assert cache2.get(candidate_digest(child), Split.VAL, "q").objective_scores is None


async def test_a_resumed_run_keeps_its_objective_scores(tmp_path) -> None:
    config = GEPAConfig(max_metric_calls=80, seed=3, frontier="both", run_dir=str(tmp_path))
    first = await run(config, ObjectiveAdapter())
    adapter = ObjectiveAdapter()
    config.max_metric_calls = 150
    resumed = await run(config, adapter)
    n = len(first.candidates)
    assert resumed.val_objective_scores[:n] == first.val_objective_scores
    assert len({(d, s, i) for d, s, i in adapter.evaluated}) == len(adapter.evaluated)
    assert resumed.metric_calls_used == first.metric_calls_used + len(adapter.evaluated)
