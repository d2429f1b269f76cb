"""Algorithm 1 of the GEPA paper, run as batched proposals without barriers.

Up to P x N proposals (`GEPAConfig.proposal_shape`) are in flight; each runs Algorithm 1's
body on its own (parent's minibatch, reflection, child's minibatch, acceptance, valset)
and a new one starts the moment one ends, instead of every stage waiting for the slowest
call of a step. All LM-bound calls share one pool of `max_concurrency` slots, so the
pool stays full. Parents and minibatches are drawn when a proposal starts, from the pool
as it is then; a proposal starts only if its worst-case cost fits beside the work in
flight, so the budget is never overshot.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic

from gepa_opt.budget import Budget, Reservation
from gepa_opt.cache import EvaluationCache, Split
from gepa_opt.components import make_component_selector
from gepa_opt.config import GEPAConfig
from gepa_opt.evaluator import Evaluator, Example
from gepa_opt.events import (
    BudgetUsed,
    EventBus,
    EventHandler,
    Finished,
    FrontierChanged,
    MergeTried,
    ProposalAccepted,
    ProposalFinished,
    ProposalRejected,
    ProposalStarted,
    RejectReason,
    StopReason,
)
from gepa_opt.merge import MergePlan, find_merge, merge_accepted, merge_subsample
from gepa_opt.pareto import (
    FrontierKey,
    aggregate,
    best_index,
    frontier_score,
    frontier_scores,
    win_counts,
)
from gepa_opt.persistence import RunStore
from gepa_opt.proposer import propose_texts
from gepa_opt.result import GEPAResult
from gepa_opt.runtime_model import auto_shape
from gepa_opt.sampling import EpochSampler
from gepa_opt.selection import make_candidate_selector
from gepa_opt.shape import ParentQueue, ProposalShape
from gepa_opt.snapshot import restore, snapshot_of
from gepa_opt.snapshot_json import decode_example_id, encode_example_id
from gepa_opt.state import GEPAState, ProposalRecord
from gepa_opt.stopping import LMUsage, RunProgress
from gepa_opt.types import (
    Adapter,
    Candidate,
    DataInst,
    EvaluationBatch,
    ExampleId,
    ReflectionLM,
)
from gepa_opt.workers import WorkerPool


@dataclass(frozen=True)
class _Draw:
    """The next proposal's parent, components and minibatch."""

    parent_idx: int
    components: list[str]
    minibatch: list[Example]


@dataclass(frozen=True)
class _Plan:
    """A drawn proposal with its iteration number and its reserved budget."""

    iteration: int
    draw: _Draw
    reservation: Reservation


async def optimize(
    seed_candidate: Candidate,
    trainset: Sequence[DataInst],
    valset: Sequence[DataInst] | None,
    adapter: Adapter[DataInst],
    reflection_lm: ReflectionLM,
    config: GEPAConfig | None = None,
    *,
    example_id: Callable[[DataInst], ExampleId] | None = None,
    on_event: EventHandler | Iterable[EventHandler] | None = None,
    usage: Callable[[], LMUsage] | None = None,
) -> GEPAResult:
    """Evolve `seed_candidate` with reflective mutation until the budget is spent.

    `trainset` feeds reflection minibatches; `valset` (D_pareto; the trainset when None,
    the paper's inference-time search mode) scores every accepted candidate. Example ids
    default to positions in their split; pass `example_id` for stable ids, which the
    evaluation cache and per-instance scores are keyed on.
    """
    engine = GEPAEngine(
        seed_candidate,
        trainset,
        trainset if valset is None else valset,
        adapter,
        reflection_lm,
        config or GEPAConfig(),
        example_id=example_id,
        on_event=on_event,
        usage=usage,
    )
    return await engine.run()


class GEPAEngine(Generic[DataInst]):
    def __init__(
        self,
        seed_candidate: Candidate,
        trainset: Sequence[DataInst],
        valset: Sequence[DataInst],
        adapter: Adapter[DataInst],
        reflection_lm: ReflectionLM,
        config: GEPAConfig,
        *,
        example_id: Callable[[DataInst], ExampleId] | None = None,
        on_event: EventHandler | Iterable[EventHandler] | None = None,
        usage: Callable[[], LMUsage] | None = None,
    ) -> None:
        _check_seed(seed_candidate, config)
        self._usage = usage or LMUsage
        self._started = time.monotonic()
        self._best_score = float("-inf")
        self._since_improvement = 0
        self._seed = dict(seed_candidate)
        self._components = list(seed_candidate)
        self._train = _identify(trainset, example_id, "trainset")
        self._val = _identify(valset, example_id, "valset")
        self._train_by_id = dict(self._train)
        self._val_by_id = dict(self._val)
        self._merge_rng = random.Random(f"gepa:{config.seed}:merge")
        self._adapter = adapter
        self._reflection_lm = reflection_lm
        self._config = config
        self._budget = Budget(config.max_metric_calls)
        self._workers = WorkerPool(config.max_concurrency)
        self._evaluator = Evaluator(adapter, EvaluationCache(), self._workers)
        self._component_selector = make_component_selector(config.module_selection)
        # Separate streams: changing how parents are picked leaves the minibatches alone.
        self.shape = _resolve_shape(config, len(self._val))
        self._sampler = sampler = EpochSampler(
            [i for i, _ in self._train],
            config.reflection_minibatch_size,
            random.Random(f"gepa:{config.seed}:minibatch"),
        )
        self._parents = ParentQueue(
            self.shape,
            make_candidate_selector(config.candidate_selection, config.epsilon),
            random.Random(f"gepa:{config.seed}:selection"),
            sampler.next_batch,
        )
        self._events = EventBus(on_event)
        self._store = RunStore(config.run_dir) if config.run_dir else None
        self._frontier: tuple[object, ...] | None = None
        self.state = GEPAState()

    async def run(self) -> GEPAResult:
        started = self._started = time.monotonic()
        if not self._resume():
            await self._add_seed()
        stop = await self._schedule()
        best = best_index(self.state.val_scores)
        await self._events.emit(
            Finished(
                iteration=self.state.iteration,
                reason=stop,
                best_idx=best,
                best_score=aggregate(self.state.val_scores[best]),
                num_candidates=len(self.state.candidates),
                metric_calls_used=self._budget.metric_calls_used,
                reflection_calls_used=self._budget.reflection_calls,
            )
        )
        return GEPAResult.from_state(
            self.state,
            self._budget,
            stop,
            wall_seconds=time.monotonic() - started,
            worker_utilization=self._workers.utilization(),
        )

    async def _add_seed(self) -> None:
        """Lines 2-3 of Algorithm 1: without the seed's val scores there is no pool."""
        if not self._budget.fits(len(self._val)):
            raise ValueError(
                f"GEPAConfig.max_metric_calls={self._budget.max_metric_calls} cannot cover "
                f"the seed's valset evaluation ({len(self._val)} examples)"
            )
        reservation = self._budget.reserve(len(self._val))
        val = await self._evaluate(self._seed, Split.VAL, self._val, reservation)
        reservation.release()
        self.state.add(self._seed, (), *self._val_results(val))
        self._best_score = aggregate(self.state.val_scores[0])
        self._save()
        await self._update_frontier()

    async def _schedule(self) -> StopReason:
        """Keep P x N proposals and merges running, and more while worker slots would sit
        idle (at most one per slot); start the next as soon as one ends or a slot frees."""
        width = self.shape.width
        most = max(width, self._config.max_concurrency)
        running: set[asyncio.Task[ProposalRecord | MergeTried]] = set()
        pending: _Draw | None = None  # drawn, but its worst case did not fit yet
        stop: StopReason | None = None
        try:
            while True:
                stop = stop or self._config.stop.check(self._progress())
                while stop is None and (
                    len(running) < width or (len(running) < most and self._workers.spare())
                ):
                    merge = self._plan_merge()
                    if merge is not None:
                        running.add(asyncio.create_task(self._run_merge(*merge)))
                        continue
                    pending = pending or self._draw()
                    minibatch = self._minibatch_cost(pending)
                    if not self._budget.fits(minibatch + len(self._val)):
                        break
                    self.state.iteration += 1  # reserved here, not in the task: no overshoot
                    plan = _Plan(self.state.iteration, pending, self._budget.reserve(minibatch))
                    running.add(asyncio.create_task(self._run_proposal(plan)))
                    pending = None
                if not running:  # nothing in flight, and the next proposal cannot fit
                    return stop or StopReason.BUDGET
                freed = asyncio.ensure_future(self._workers.freed())
                done, _ = await asyncio.wait(running | {freed}, return_when=asyncio.FIRST_COMPLETED)
                freed.cancel()
                done.discard(freed)
                running -= done
                for task in sorted(done, key=lambda t: t.result().iteration):
                    stalled = self._finish(task.result())  # always: it records the proposal
                    stop = stop or stalled
        except BaseException:
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            raise

    def _draw(self) -> _Draw:
        """Parent, components and minibatch of the next proposal (lines 5-8)."""
        state = self.state
        parent_idx, minibatch_ids = self._parents.next(state.val_scores, self._frontier_scores())
        components, cursor = self._component_selector.select(
            self._components, state.component_cursor[parent_idx]
        )
        state.component_cursor[parent_idx] = cursor
        minibatch = [(i, self._train_by_id[i]) for i in minibatch_ids]
        return _Draw(parent_idx, components, minibatch)

    def _minibatch_cost(self, draw: _Draw) -> int:
        """Parent's uncached minibatch + child's minibatch: reserved at launch. A proposal
        starts only if a valset pass would fit after it too (else its child could never
        join the pool and its spend is waste); that pass is reserved on acceptance."""
        parent = self.state.candidates[draw.parent_idx]
        missing = self._evaluator.missing(parent, Split.TRAIN, draw.minibatch)
        return missing + len(draw.minibatch)

    async def _reserve_valset(self, child: Candidate) -> Reservation | None:
        """A valset pass for an accepted child, once it fits; None if it never can (no
        other work in flight holds metric calls it could give back)."""
        need = self._evaluator.missing(child, Split.VAL, self._val)
        while not self._budget.fits(need):
            if self._budget.reserved == 0:
                return None
            await self._budget.freed()
        return self._budget.reserve(need)

    async def _run_proposal(self, plan: _Plan) -> ProposalRecord:
        draw = plan.draw
        await self._events.emit(
            ProposalStarted(
                iteration=plan.iteration,
                parent_idx=draw.parent_idx,
                components=tuple(draw.components),
                minibatch_ids=tuple(i for i, _ in draw.minibatch),
            )
        )
        start = time.monotonic()
        try:
            record = await self._propose(plan)
        finally:
            plan.reservation.release()
        await self._events.emit(
            ProposalFinished(
                iteration=plan.iteration,
                parent_idx=draw.parent_idx,
                candidate_idx=record.candidate_idx,
                reject_reason=record.reject_reason,
                metric_calls=record.metric_calls,
                seconds=time.monotonic() - start,
            )
        )
        return record

    def _plan_merge(self) -> tuple[int, MergePlan, list[ExampleId], Reservation] | None:
        """A merge to launch now: one is due after each accepted proposal (upstream's
        rule), while invocations remain and a whole valset pass still fits."""
        state, config = self.state, self._config
        if not (
            config.use_merge
            and state.merges_due > 0
            and len(state.merges_tried) < config.max_merge_invocations
            and self._budget.fits(len(self._val))
        ):
            return None
        state.merges_due -= 1
        frontier = list(win_counts(self._frontier_scores()))
        tried = set(state.merges_tried)
        plan = find_merge(
            state.candidates, state.parents, state.val_scores, self._merge_rng, tried, frontier
        )
        if plan is None:
            return None
        state.merges_tried.append(plan.key)
        ids = merge_subsample(
            state.val_scores[plan.i],
            state.val_scores[plan.j],
            config.merge_subsample_size,
            self._merge_rng,
        )
        state.iteration += 1
        # the subsample is part of the valset: its scores count toward the full pass
        return state.iteration, plan, ids, self._budget.reserve(len(self._val))

    async def _run_merge(
        self, iteration: int, plan: MergePlan, ids: list[ExampleId], reservation: Reservation
    ) -> MergeTried:
        state = self.state
        try:
            subsample = [(k, self._val_by_id[k]) for k in ids]
            batch = await self._evaluate(
                plan.candidate, Split.VAL, subsample, reservation, iteration
            )
            merged = dict(zip(ids, batch.scores, strict=True))
            i_scores, j_scores = state.val_scores[plan.i], state.val_scores[plan.j]
            parents_best = max(sum(i_scores[k] for k in ids), sum(j_scores[k] for k in ids))
            candidate_idx = None
            if merge_accepted(merged, i_scores, j_scores) and not state.contains(plan.candidate):
                val = await self._evaluate(
                    plan.candidate, Split.VAL, self._val, reservation, iteration
                )
                if not state.contains(plan.candidate):
                    parents = (plan.i, plan.j)
                    candidate_idx = state.add(plan.candidate, parents, *self._val_results(val))
            event = MergeTried(
                iteration=iteration,
                i=plan.i,
                j=plan.j,
                ancestor=plan.ancestor,
                subsample_score=sum(merged.values()),
                parents_best_subsample_score=parents_best,
                candidate_idx=candidate_idx,
            )
            await self._events.emit(event)
            if candidate_idx is not None:
                await self._update_frontier(iteration)
            return event
        finally:
            reservation.release()

    def _progress(self) -> RunProgress:
        spent = self._usage()
        return RunProgress(
            elapsed_s=time.monotonic() - self._started,
            metric_calls_used=self._budget.metric_calls_used,
            reflection_calls_used=self._budget.reflection_calls,
            prompt_tokens=spent.prompt_tokens,
            completion_tokens=spent.completion_tokens,
            cost_usd=spent.cost_usd,
            best_score=self._best_score,
            proposals_since_improvement=self._since_improvement,
        )

    def _finish(self, record: ProposalRecord | MergeTried) -> StopReason | None:
        stop = self._record(record)
        self._save()
        return stop

    def _record(self, record: ProposalRecord | MergeTried) -> StopReason | None:
        state = self.state
        best = aggregate(state.val_scores[best_index(state.val_scores)])
        self._since_improvement = 0 if best > self._best_score else self._since_improvement + 1
        self._best_score = max(best, self._best_score)
        if isinstance(record, MergeTried):
            return None
        state.history.append(record)
        state.idle_iterations = 0 if record.metric_calls else state.idle_iterations + 1
        if state.idle_iterations >= self._config.max_idle_iterations:
            return StopReason.STALLED
        return None

    async def _propose(self, plan: _Plan) -> ProposalRecord:
        """Lines 9-14 of Algorithm 1 for one drawn parent."""
        config, draw, iteration = self._config, plan.draw, plan.iteration
        parent_idx, components, minibatch = draw.parent_idx, draw.components, draw.minibatch
        parent = self.state.candidates[parent_idx]
        paid_before = plan.reservation.left
        paid_after: int | None = None  # metric calls paid once the valset pass is done
        parent_eval = await self._evaluate(
            parent, Split.TRAIN, minibatch, plan.reservation, iteration
        )
        parent_sum = sum(parent_eval.scores)

        def record(
            child_eval: EvaluationBatch | None,
            reason: RejectReason | None,
            candidate_idx: int | None = None,
        ) -> ProposalRecord:
            return ProposalRecord(
                iteration=iteration,
                parent_idx=parent_idx,
                components=tuple(components),
                minibatch_ids=tuple(i for i, _ in minibatch),
                parent_scores=tuple(parent_eval.scores),
                child_scores=None if child_eval is None else tuple(child_eval.scores),
                reject_reason=reason,
                candidate_idx=candidate_idx,
                metric_calls=(
                    paid_after if paid_after is not None else paid_before - plan.reservation.left
                ),
            )

        async def reject(
            reason: RejectReason, child_eval: EvaluationBatch | None = None
        ) -> ProposalRecord:
            await self._events.emit(
                ProposalRejected(
                    iteration=iteration,
                    parent_idx=parent_idx,
                    reason=reason,
                    parent_minibatch_score=parent_sum,
                    child_minibatch_score=None if child_eval is None else sum(child_eval.scores),
                )
            )
            return record(child_eval, reason)

        if config.skip_perfect_score and all(s >= config.perfect_score for s in parent_eval.scores):
            return await reject(RejectReason.PERFECT_PARENT)

        texts = await propose_texts(
            self._adapter,
            self._reflection_lm,
            parent,
            parent_eval,
            components,
            config.template_for,
            self._workers,
        )
        self._budget.record_reflections(len(components))
        await self._emit_budget(iteration, metric_calls=0, reflection_calls=len(components))
        changed = {c: text for c, text in texts.items() if text}
        if not changed:
            return await reject(RejectReason.EMPTY_PROPOSAL)
        child = {**parent, **changed}
        if self.state.contains(child):
            return await reject(RejectReason.DUPLICATE)

        child_eval = await self._evaluate(
            child, Split.TRAIN, minibatch, plan.reservation, iteration
        )
        child_sum = sum(child_eval.scores)
        if child_sum <= parent_sum:
            return await reject(RejectReason.NOT_IMPROVED, child_eval)

        paid_after = paid_before - plan.reservation.left
        plan.reservation.release()  # the minibatch work is done: free it for others
        valset = await self._reserve_valset(child)
        if valset is None:
            return await reject(RejectReason.NO_BUDGET, child_eval)
        reserved = valset.left
        try:
            val = await self._evaluate(child, Split.VAL, self._val, valset, iteration)
        finally:
            paid_after += reserved - valset.left
            valset.release()
        if self.state.contains(child):  # a concurrent proposal wrote the same text first
            return await reject(RejectReason.DUPLICATE, child_eval)
        child_idx = self.state.add(child, (parent_idx,), *self._val_results(val))
        self.state.merges_due += 1
        await self._events.emit(
            ProposalAccepted(
                iteration=iteration,
                parent_idx=parent_idx,
                candidate_idx=child_idx,
                components=tuple(changed),
                parent_minibatch_score=parent_sum,
                child_minibatch_score=child_sum,
                val_score=aggregate(self.state.val_scores[child_idx]),
            )
        )
        await self._update_frontier(iteration)
        return record(child_eval, None, child_idx)

    async def _evaluate(
        self,
        candidate: Candidate,
        split: Split,
        examples: Sequence[Example],
        reservation: Reservation,
        iteration: int = 0,
    ) -> EvaluationBatch:
        batch, charged = await self._evaluator.evaluate(candidate, split, examples, reservation)
        if charged:
            self._save()
            await self._emit_budget(iteration, metric_calls=charged, reflection_calls=0)
        return batch

    # ---- persistence (GEPAConfig.run_dir) ----

    def _rngs(self) -> dict[str, random.Random]:
        return {
            "selection": self._parents.rng,
            "minibatch": self._sampler.rng,
            "merge": self._merge_rng,
        }

    def _save(self) -> None:
        """Persist what is finished: in-flight pairs are charged but have no result yet, so
        they are left out of the saved budget and a resumed run pays them once."""
        if self._store is None or not self.state.candidates:
            return
        snapshot = snapshot_of(
            self.state,
            self._budget,
            self._evaluator.cache,
            self._rngs(),
            extra={
                "sampler_queue": [encode_example_id(i) for i in self._sampler.queue],
                "parent_queue": [
                    [parent, [encode_example_id(i) for i in ids]]
                    for parent, ids in self._parents.queued
                ],
                "best_score": self._best_score,
                "since_improvement": self._since_improvement,
            },
        )
        snapshot.metric_calls_used -= self._evaluator.unfinished()
        self._store.save(snapshot)

    def _resume(self) -> bool:
        """Load the state saved in run_dir, if any; True when the run continues from it."""
        snapshot = self._store.load() if self._store is not None else None
        if snapshot is None:
            return False
        if snapshot.candidates[0] != self._seed:
            raise ValueError(
                f"{self._store.state_path}: its seed candidate is not this run's seed; "
                "use a new GEPAConfig.run_dir for a new run"
            )
        self.state, budget, cache, rngs = restore(snapshot)
        budget.max_metric_calls = self._config.max_metric_calls  # a resume may extend it
        self._budget = budget
        self._evaluator = Evaluator(self._adapter, cache, self._workers)
        for name, rng in self._rngs().items():
            rng.setstate(rngs[name].getstate())
        extra = snapshot.extra
        self._sampler.queue = [decode_example_id(i) for i in extra["sampler_queue"]]
        self._parents.queued = [
            (parent, [decode_example_id(i) for i in ids]) for parent, ids in extra["parent_queue"]
        ]
        self._best_score = extra["best_score"]
        self._since_improvement = extra["since_improvement"]
        return True

    async def _emit_budget(self, iteration: int, metric_calls: int, reflection_calls: int) -> None:
        await self._events.emit(
            BudgetUsed(
                iteration=iteration,
                metric_calls=metric_calls,
                reflection_calls=reflection_calls,
                metric_calls_used=self._budget.metric_calls_used,
                max_metric_calls=self._budget.max_metric_calls,
                reflection_calls_used=self._budget.reflection_calls,
            )
        )

    async def _update_frontier(self, iteration: int = 0) -> None:
        """Announce only real changes, so a caller can log one point per improvement."""
        scores = self.state.val_scores
        best = best_index(scores)
        event = FrontierChanged(
            iteration=iteration,
            best_idx=best,
            best_score=aggregate(scores[best]),
            frontier_score=frontier_score(scores),
            pareto_candidates=tuple(win_counts(self._frontier_scores())),
            num_candidates=len(scores),
        )
        key = (event.best_idx, event.frontier_score, event.pareto_candidates)
        if key != self._frontier:
            self._frontier = key
            await self._events.emit(event)

    def _frontier_scores(self) -> list[dict[FrontierKey, float]]:
        """Per candidate, its scores on the keys of the GEPAConfig.frontier in use."""
        state = self.state
        return frontier_scores(state.val_scores, state.val_objective_scores, self._config.frontier)

    def _val_results(
        self, batch: EvaluationBatch
    ) -> tuple[dict[ExampleId, float], dict[ExampleId, dict[str, float]]]:
        """A full valset batch as (per-instance scores, per-instance objective scores)."""
        ids = [i for i, _ in self._val]
        scores = dict(zip(ids, batch.scores, strict=True))
        objectives: dict[ExampleId, dict[str, float]] = {}
        if batch.objective_scores is not None:
            objectives = {i: dict(o) for i, o in zip(ids, batch.objective_scores, strict=True) if o}
        if self._config.frontier != "instances":
            pool = self.state.val_objective_scores
            known = set(next(iter(pool[0].values()), {})) if pool else None
            _check_objectives(ids, objectives, known, self._config.frontier)
        return scores, objectives


def _resolve_shape(config: GEPAConfig, valset_size: int) -> ProposalShape:
    """ "auto": the shape the runtime model predicts fastest per proposal for this pool."""
    if config.proposal_shape != "auto":
        return ProposalShape.parse(config.proposal_shape)
    parents, children = auto_shape(
        config.max_concurrency, config.reflection_minibatch_size, valset_size
    )
    return ProposalShape(parents, children)


def _identify(
    data: Sequence[DataInst], example_id: Callable[[DataInst], ExampleId] | None, name: str
) -> list[Example]:
    """Pair each example with its id; ids must be unique, or cache hits would cross examples."""
    if len(data) == 0:
        raise ValueError(f"{name} is empty")
    ids = [example_id(x) for x in data] if example_id else list(range(len(data)))
    seen: set[ExampleId] = set()
    for position, i in enumerate(ids):
        if i in seen:
            raise ValueError(f"{name}[{position}]: example id {i!r} is not unique in {name}")
        seen.add(i)
    return list(zip(ids, data, strict=True))


def _check_objectives(
    ids: Sequence[ExampleId],
    objectives: dict[ExampleId, dict[str, float]],
    known: set[str] | None,
    frontier: str,
) -> None:
    """Every val example must score the same named objectives: the run's (the seed's), or,
    for the seed itself, every name any example of its batch reports."""
    names = known if known is not None else set().union(*objectives.values())
    need = f"GEPAConfig.frontier={frontier!r} needs objective_scores with the same names"
    if known is not None and not known:
        raise ValueError(
            f"{need} for every val example, but the pool's seed was scored without any "
            "(a run resumed from one saved with frontier='instances'?)"
        )
    if not names:
        raise ValueError(
            f"valset example {ids[0]!r} has no objective_scores; {need} for every val "
            "example (EvaluationBatch.objective_scores)"
        )
    for i in ids:
        got = set(objectives.get(i, {}))
        if missing := sorted(names - got):
            raise ValueError(
                f"valset example {i!r}: objective_scores lack objective {missing[0]!r}; "
                f"{need} {sorted(names)} for every val example"
            )
        if extra := sorted(got - names):
            raise ValueError(
                f"valset example {i!r}: objective {extra[0]!r} is not one of the run's "
                f"objectives {sorted(names)}; {need} for every val example"
            )


def _check_seed(seed: Candidate, config: GEPAConfig) -> None:
    if not seed:
        raise ValueError("seed_candidate has no components")
    for name, text in seed.items():
        if not isinstance(name, str) or not isinstance(text, str):
            raise ValueError(f"seed_candidate[{name!r}] must map a str name to a str text")
    unknown = sorted(set(config.component_prompt_templates) - set(seed))
    if unknown:
        raise ValueError(
            f"GEPAConfig.component_prompt_templates names unknown components {unknown}; "
            f"the seed has {list(seed)}"
        )
