"""Algorithm 1 of the GEPA paper, run as batched proposals without a global barrier.

Proposals run in sibling groups (`GEPAConfig.proposal_shape` P x N: P groups, N children
each): a group draws its parent and minibatch from the pool as it is when it starts,
pays the parent's minibatch once, reflects N times, judges each child on the minibatch,
sends its winners (`GEPAConfig.siblings`) to the valset, and the next group starts the
moment one ends (the first groups beside the seed's valset pass: while the pool is empty
they can only draw the seed). All LM-bound calls share one pool of `max_concurrency`
slots, minibatch and reflection work first (`_priority`); `in_flight.InFlightPolicy`
decides whether slots that would still idle start more groups. A group starts only if
its worst-case cost fits beside the work in flight, so the budget is never overshot.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Generic

from gepa_opt.budget import Budget, Reservation
from gepa_opt.cache import EvaluationCache, Split
from gepa_opt.checkpoint import GroupInFlight, Position, load_run, replay_journal, save_run
from gepa_opt.components import BlamedSelector, make_component_selector
from gepa_opt.config import GEPAConfig
from gepa_opt.demo_proposal import DemoIndex, propose_demonstrations
from gepa_opt.demonstrations import Demonstrations
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
from gepa_opt.group import Draw, ParentNotAdmitted, Plan, Trial
from gepa_opt.in_flight import InFlightPolicy, Room
from gepa_opt.inputs import check_demonstrations, check_objectives, check_seed, identify
from gepa_opt.journal import CallJournal
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
from gepa_opt.refusal import restates_meta_prompt
from gepa_opt.result import GEPAResult
from gepa_opt.runtime_model import CallLatency, auto_shape
from gepa_opt.sampling import EpochSampler
from gepa_opt.selection import make_candidate_selector
from gepa_opt.shape import ProposalShape
from gepa_opt.state import GEPAState, ProposalRecord
from gepa_opt.stopping import LMUsage, RunProgress
from gepa_opt.types import (
    Adapter,
    CallFailed,
    Candidate,
    DataInst,
    EvaluationBatch,
    ExampleId,
    ReflectionLM,
    candidate_digest,
)
from gepa_opt.workers import WorkerPool


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
    demonstrations: Demonstrations | None = None,
) -> GEPAResult:
    """Evolve `seed_candidate` with reflective mutation until the budget is spent.

    `trainset` feeds reflection minibatches; `valset` (D_pareto; the trainset when None,
    the paper's inference-time search mode) scores every accepted candidate. Example ids
    default to positions in their split; pass `example_id` for stable ids, which the
    evaluation cache and per-instance scores are keyed on. `demonstrations`: a component
    whose text is few-shot demonstrations drawn from a pool by the evidence, with no
    reflection call (`gepa_opt.demonstrations`).
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
        demonstrations=demonstrations,
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
        demonstrations: Demonstrations | None = None,
    ) -> None:
        check_seed(seed_candidate, config)
        check_demonstrations(demonstrations, seed_candidate, config)
        self._usage = usage or LMUsage
        self._started = time.monotonic()
        self._best_score = float("-inf")
        self._since_improvement = 0
        self._seed = dict(seed_candidate)
        self._components = list(seed_candidate)
        self._demos = None if demonstrations is None else DemoIndex(demonstrations)
        # the components a reflection LM rewrites: all but the demonstrations
        self._reflective = [c for c in self._components if c != self._demos_component]
        self._train = identify(trainset, example_id, "trainset")
        self._val = identify(valset, example_id, "valset")
        self._train_by_id = dict(self._train)
        self._val_by_id = dict(self._val)
        self._merge_rng = random.Random(f"gepa:{config.seed}:merge")
        self._adapter = adapter
        self._reflection_lm = reflection_lm
        self._config = config
        self._budget = Budget(
            config.max_metric_calls, max_reflection_calls=config.max_reflection_calls
        )
        self._workers = WorkerPool(config.max_concurrency)
        self._store = RunStore(config.run_dir) if config.run_dir else None
        self._journal: CallJournal | None = None  # opened by `run`
        self._evaluator = Evaluator(
            adapter, EvaluationCache(), self._workers, attempts=config.call_attempts
        )
        self._reflections: dict[tuple[int, str], str] = {}  # journaled, for resumed proposals
        self._resumed: list[tuple[Draw, list[tuple[int, list[str]]]]] = []
        self._component_selector = make_component_selector(config.module_selection)
        if config.module_selection == "blamed" and not hasattr(adapter, "blame"):
            raise ValueError(
                "GEPAConfig.module_selection 'blamed' needs an adapter with "
                "`async blame(candidate, eval_batch) -> {component: blame}`"
            )
        self._selector = make_candidate_selector(
            config.candidate_selection, config.epsilon, config.parent_pruning
        )
        # Separate streams: changing how parents are picked leaves the minibatches alone.
        self._selection_rng = random.Random(f"gepa:{config.seed}:selection")
        self._sampler = EpochSampler(
            [i for i, _ in self._train],
            config.reflection_minibatch_size,
            random.Random(f"gepa:{config.seed}:minibatch"),
        )
        self._groups = 0  # groups holding a place of the shape
        self._group_plans: dict[int, list[Plan]] = {}  # first iteration -> a group in flight
        # parent's digest -> its groups until they end (valset passes included)
        self._busy: Counter[str] = Counter()
        self._continued: list[Draw] = []  # winners whose next group is due (continue_winners)
        # round-robin positions of parents not in the pool yet (the seed during its valset
        # pass, a winner during its own), by digest: its first groups alternate components
        self._waiting_cursors: dict[str, int] = {}
        self._wake = asyncio.Event()  # a group freed its place before its task ended
        # continued groups announce their proposals once their parent is admitted, the
        # finished ones with their rejections: in one piece, or the events would show
        # more proposals in flight than there were
        self._announcing = asyncio.Lock()
        self._proposals_in_flight = 0
        self._judged = self._improved = 0  # children judged on a minibatch, and beating it
        self._admitted = self._leads = 0  # winners added to the pool, and those that led it
        self._shapes: list[ProposalShape] = []
        self._set_shape(self._auto_shape() if config.proposal_shape == "auto" else None)
        self._events = EventBus(on_event)
        self._frontier: tuple[object, ...] | None = None
        self.state = GEPAState()

    @property
    def _demos_component(self) -> str | None:
        return None if self._demos is None else self._demos.demonstrations.component

    @property
    def shape(self) -> ProposalShape:
        """The shape in use now ("auto" re-decides it as measurements come in)."""
        return self._shapes[-1]

    def shapes_used(self) -> str:
        """Every shape the run used, in order: "2x1" or, for "auto", e.g. "1x1>1x2"."""
        return ">".join(str(shape) for shape in self._shapes)

    def _set_shape(self, shape: ProposalShape | None) -> None:
        config = self._config
        shape = shape or ProposalShape.parse(config.proposal_shape)
        if not self._shapes or shape != self.shape:
            self._shapes.append(shape)
        self._policy = InFlightPolicy(config.in_flight, shape, config.max_concurrency)

    def _auto_shape(self) -> ProposalShape:
        """The runtime model's shape for the latencies, acceptance and depth measured so
        far (before anything is measured: equal latencies, an acceptance of 1/2, and every
        winner taken to lead, the case where breadth costs most)."""
        workers = self._workers
        metric_s = workers.mean_seconds("metric") or 1.0
        reflection_s = workers.mean_seconds("reflection")
        latency = CallLatency(
            max(metric_s, 1e-6), metric_s if reflection_s is None else reflection_s
        )
        # a prior of one acceptance in two, worth two judged children
        acceptance = (self._improved + 1) / (self._judged + 2)
        parents, children = auto_shape(
            self._config.max_concurrency,
            self._config.reflection_minibatch_size,
            len(self._val),
            latency=latency,
            acceptance_rate=acceptance,
            lead_rate=self._lead_rate(),
            reflections_per_proposal=max(1, self._reflections_per_child()),
        )
        return ProposalShape(parents, children)

    def _reflections_per_child(self) -> int:
        """Reflection calls one proposal makes at most: one per component it rewrites,
        none for demonstrations."""
        reflective = len(self._reflective)
        return min(1, reflective) if self._config.module_selection == "round_robin" else reflective

    async def run(self) -> GEPAResult:
        started = self._started = time.monotonic()
        if self._store is not None:
            self._journal = self._evaluator.journal = CallJournal(self._store.journal_path)
        try:
            seed = None if self._resume() else self._start_seed()
            stop = await self._schedule(seed)
        finally:
            if self._journal is not None:
                self._journal.close()
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

    def _start_seed(self) -> asyncio.Task[list[ProposalRecord]]:
        """Lines 2-3 of Algorithm 1, run beside the first groups: while the pool is empty
        they can only draw the seed, so they start at once and wait for its index only to
        join the pool (as a group continued from a winner waits for its parent's)."""
        if not self._budget.fits(len(self._val)):
            raise ValueError(
                f"GEPAConfig.max_metric_calls={self._budget.max_metric_calls} cannot cover "
                f"the seed's valset evaluation ({len(self._val)} examples)"
            )
        reservation = self._budget.reserve(len(self._val))  # before any group's
        self._seed_index = asyncio.get_running_loop().create_future()
        return asyncio.create_task(self._add_seed(reservation))

    async def _add_seed(self, reservation: Reservation) -> list[ProposalRecord]:
        """Without the seed's val scores there is no pool: a failed pass ends the run."""
        try:
            val = await self._evaluate(self._seed, Split.VAL, self._val, reservation)
        except CallFailed as error:
            raise CallFailed(f"the seed's valset pass: {error}") from error
        finally:
            reservation.release()
        self._add_to_pool(self._seed, (), val)
        self._best_score = aggregate(self.state.val_scores[0])
        self._seed_index.set_result(0)
        self._save()
        await self._update_frontier()
        return []

    async def _schedule(self, seed: asyncio.Task[list[ProposalRecord]] | None) -> StopReason:
        """Keep the shape's P groups and the merges running, plus the extra groups the
        in-flight policy allows while slots would idle; start the next as soon as one
        ends or a slot frees. `seed`: the seed's valset pass, when it is still to run."""
        running: set[asyncio.Task[list[ProposalRecord] | MergeTried]] = set()
        if seed is not None:
            running.add(seed)
        pending: Draw | None = None  # drawn, but its worst case did not fit yet
        stop: StopReason | None = None
        try:
            for draw, resumed in self._resumed:  # groups a kill interrupted go on first
                if (plans := self._plan_group(draw, resumed)) is not None:
                    running.add(asyncio.create_task(self._run_group(*plans)))
            self._resumed.clear()
            while True:
                stop = stop or self._config.stop.check(self._progress()) or self._too_many_failed()
                while stop is None:
                    room = self._policy.room(
                        self._groups, self._proposals_in_flight, self._workers.spare()
                    )
                    if room is None:
                        break
                    merge = self._plan_merge()
                    if merge is not None:
                        running.add(asyncio.create_task(self._run_merge(*merge)))
                        continue
                    pending = pending or self._draw(room)
                    if pending is None:
                        break  # no parent an extra group may take
                    plans = self._plan_group(pending)
                    if plans is None:
                        break
                    running.add(asyncio.create_task(self._run_group(*plans)))
                    pending = None
                    # saved as soon as it is numbered: a resumed run finishes it, and never
                    # hands its iteration numbers (and journaled reflections) to another
                    self._save()
                if not running:  # nothing in flight, and the next group cannot fit
                    return stop or self._out_of_budget()
                wake = {
                    asyncio.ensure_future(self._workers.freed()),
                    asyncio.ensure_future(self._wake.wait()),
                }
                done, _ = await asyncio.wait(running | wake, return_when=asyncio.FIRST_COMPLETED)
                for waiter in wake:
                    waiter.cancel()
                done -= wake
                self._wake.clear()
                running -= done
                records = [r for task in done for r in _records(task.result())]
                for record in sorted(records, key=lambda r: r.iteration):
                    stalled = self._finish(record)  # always: it records the proposal
                    stop = stop or stalled
        except BaseException:
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            raise

    def _too_many_failed(self) -> StopReason | None:
        limit = self._config.max_failed_calls
        if limit is not None and self._budget.failed_calls >= limit:
            return StopReason.FAILED_CALLS
        return None

    def _out_of_budget(self) -> StopReason:
        left = self._budget.reflections_left()
        if left is not None and left < self._reflections_per_child():
            return StopReason.REFLECTION_BUDGET
        return StopReason.BUDGET

    def _draw(self, room: Room) -> Draw | None:
        """Parent and minibatch of the next group (lines 5-6): a winner to continue from
        first, else the selector's pick; an extra group only from a parent the in-flight
        policy allows, else None."""
        while room == "core" and self._continued:
            draw = self._continued.pop(0)
            if draw.known or not draw.parent_index.done():  # else the winner was not admitted
                return draw
        if self._config.proposal_shape == "auto":
            self._set_shape(self._auto_shape())
        if not self.state.candidates:  # the seed's valset pass is running: no front yet
            return self._draw_from(self._seed, self._seed_index) if room == "core" else None
        frontier = self._frontier_scores()
        allowed = None
        if room == "extra":
            front = list(win_counts(frontier, self._config.parent_pruning))
            busy = Counter(
                {k: self._busy[candidate_digest(self.state.candidates[k])] for k in front}
            )
            allowed = self._policy.extra_parents(front, busy)
        parent_idx = self._selector.select(
            self.state.val_scores, self._selection_rng, frontier, allowed
        )
        if parent_idx is None:
            return None
        index = asyncio.get_running_loop().create_future()
        index.set_result(parent_idx)
        return self._draw_from(self.state.candidates[parent_idx], index)

    def _draw_from(self, parent: Candidate, index: asyncio.Future[int]) -> Draw:
        minibatch = [(i, self._train_by_id[i]) for i in self._sampler.next_batch()]
        return Draw(parent, minibatch, index)

    def _continue_from(self, trial: Trial) -> Draw:
        """The winner's next group: on the minibatch it won on where
        `GEPAConfig.reuse_winning_minibatch` says so and its own group did not reuse one."""
        assert trial.child is not None and trial.admitted is not None
        draw, mode = trial.plan.draw, self._config.reuse_winning_minibatch
        if not draw.reused and (mode == "always" or (mode == "auto" and self._lead_rate() > 0.5)):
            return Draw(trial.child, draw.minibatch, trial.admitted, reused=True)
        return self._draw_from(trial.child, trial.admitted)

    def _lead_rate(self) -> float:
        """The share of winners admitted so far that led the pool, with a prior of one that
        did: depth until shown otherwise."""
        return (self._leads + 1) / (self._admitted + 1)

    def _plan_group(
        self, draw: Draw, resumed: list[tuple[int, list[str]]] | None = None
    ) -> tuple[Reservation, list[Plan]] | None:
        """Reserve the parent's uncached minibatch and one minibatch per child, for as
        many of the shape's N children as fit while a valset pass would fit after them
        (else no child could join the pool and the spend is waste); None if not one fits.
        A winner's valset pass is reserved once it has won. `resumed`: the (iteration,
        components) of a group that was in flight when the run was killed."""
        parent_cost = self._evaluator.missing(draw.parent, Split.TRAIN, draw.minibatch)
        b = len(draw.minibatch)
        fit = (self._budget.remaining - parent_cost - len(self._val)) // b
        children = min(self.shape.children if resumed is None else len(resumed), fit)
        reflections = self._budget.reflections_left()
        per_child = self._reflections_per_child()
        if reflections is not None and resumed is None and per_child:  # a resumed group
            children = min(children, reflections // per_child)  # was reserved for
        if children < 1:
            return None
        group = self._budget.reserve(parent_cost)
        cursor = self._cursor(draw)
        plans: list[Plan] = []
        for k in range(children):
            if resumed is None:
                components, cursor = self._component_selector.select(self._components, cursor)
                self.state.iteration += 1  # reserved here, not in the task: no overshoot
                iteration = self.state.iteration
            else:
                iteration, components = resumed[k]
            reflective = sum(c in self._reflective for c in components)
            hold = self._budget.reserve_reflections(reflective)
            variant = sum(self._demos_component in plan.components for plan in plans)
            reservation = self._budget.reserve(b)
            plans.append(Plan(iteration, draw, components, reservation, hold, variant))
        if resumed is None:
            if draw.known:
                self.state.component_cursor[draw.parent_idx] = cursor
            else:
                self._waiting_cursors[candidate_digest(draw.parent)] = cursor
        self._occupy(draw, len(plans), +1)  # until the group frees its place (`_run_group`)
        self._busy[candidate_digest(draw.parent)] += 1  # until its task ends
        self._group_plans[plans[0].iteration] = plans
        return group, plans

    def _cursor(self, draw: Draw) -> int:
        """Where the parent's round-robin over components resumes: a winner goes on from
        where its parent's proposal of it left off (`_next_cursor`), and its groups
        drawn before it joined the pool carry their position over to it."""
        if draw.known:
            return self.state.component_cursor[draw.parent_idx]
        return self._waiting_cursors.get(candidate_digest(draw.parent), 0)

    def _next_cursor(self, plan: Plan) -> int:
        """Where a child of `plan` starts its round robin: at the component after the one
        its parent's proposal changed, as upstream gepa does. Starting every child at the
        first component would give the later ones no turn in a lineage of winners: a
        demonstrations component after the instructions would never be proposed while
        instruction rewrites kept winning."""
        return (self._components.index(plan.components[-1]) + 1) % len(self._components)

    def _add_to_pool(
        self, candidate: Candidate, parents: tuple[int, ...], val: EvaluationBatch
    ) -> int:
        """Line 14's admission, with the round-robin position its first groups reached."""
        index = self.state.add(candidate, parents, *self._val_results(val))
        cursor = self._waiting_cursors.pop(candidate_digest(candidate), 0)
        self.state.component_cursor[index] = cursor
        return index

    def _occupy(self, draw: Draw, proposals: int, sign: int) -> None:
        """A group's place in the shape (freed early when it continues from a winner)."""
        self._groups += sign
        self._proposals_in_flight += sign * proposals

    async def _run_group(self, group: Reservation, plans: list[Plan]) -> list[ProposalRecord]:
        """Lines 7-14 of Algorithm 1 for N children of one parent on one minibatch."""
        draw, first = plans[0].draw, plans[0].iteration
        started = time.monotonic()
        occupied = True
        announced = draw.known  # a continued group's parent has no index yet
        successor: Draw | None = None
        try:
            if announced:
                for plan in plans:
                    await self._announce_start(plan, draw.parent_idx)
            paid = group.left
            try:
                parent_eval = await self._evaluate(
                    draw.parent, Split.TRAIN, draw.minibatch, group, first
                )
            except CallFailed:  # the children have nothing to be compared with
                parent_eval = None
            paid -= group.left
            group.release()
            if parent_eval is None:
                no_scores = EvaluationBatch(outputs=[], scores=[])
                trials = [Trial(p, no_scores, reason=RejectReason.FAILED_CALLS) for p in plans]
            else:
                # set by the first child that beats the parent, when that ends the wait
                outpace = asyncio.Event() if self._first_improver_wins() else None
                async with asyncio.TaskGroup() as tasks:
                    running = [
                        tasks.create_task(self._trial(plan, parent_eval, outpace)) for plan in plans
                    ]
                trials = [task.result() for task in running]
            trials[0].paid += paid
            winners = self._winners(trials)
            for trial in winners:
                assert trial.child is not None
                self._waiting_cursors.setdefault(
                    candidate_digest(trial.child), self._next_cursor(trial.plan)
                )
            for trial in trials:
                if trial.reason is None and trial not in winners:
                    trial.reason = RejectReason.SIBLING_BETTER
            # (winner, its valset reservation, or None: reserved by its admission, side by
            # side with the others', since one holding budget another waits for would hang)
            admissions: list[tuple[Trial, Reservation | None]] = [(t, None) for t in winners]
            handed_on: Draw | None = None  # the lineage's next group, due now
            if not winners and not draw.parent_index.done():
                # a continued group that failed: its parent, the lineage's newest winner,
                # is not in the pool until its valset pass ends, so a draw now would miss
                # it; try it again on the next minibatch instead of waiting for that pass
                handed_on = self._draw_from(draw.parent, draw.parent_index)
            if self._config.continue_winners and len(winners) == 1:
                (trial,) = winners
                valset = await self._reserve_valset(trial.child)
                if valset is None:
                    trial.reason, admissions = RejectReason.NO_BUDGET, []
                else:  # the winner's next group starts now, beside its valset pass
                    admissions = [(trial, valset)]
                    trial.admitted = asyncio.get_running_loop().create_future()
                    handed_on = successor = self._continue_from(trial)
            if handed_on is not None:  # this group's place goes to it
                self._continued.append(handed_on)
                self._occupy(draw, len(plans), -1)
                occupied = False
                self._wake.set()
            # the winners' valset passes start now; only joining the pool waits for the
            # parent's index, so a lineage's passes run side by side, not one after another
            async with asyncio.TaskGroup() as tasks:
                passes = [
                    tasks.create_task(self._valset_pass(*admission)) for admission in admissions
                ]
                try:
                    parent_idx = await draw.parent_index  # a continued group: its parent's
                except ParentNotAdmitted as lost:  # its valset pass failed: nothing to compare
                    parent_idx = lost.lineage
                    for running_pass in passes:
                        running_pass.cancel()
                    admissions, passes = [], []
                    for trial in trials:
                        trial.reason = RejectReason.FAILED_CALLS
                async with self._announcing:  # a late announcement is not interleaved
                    for trial in trials:
                        if not announced:
                            await self._announce_start(trial.plan, parent_idx)
                        if trial.reason is not None:
                            await self._announce_rejection(trial, parent_idx)
            for (trial, _), done in zip(admissions, passes, strict=True):
                await self._admit(trial, done.result(), parent_idx)
            for trial in trials:
                await self._events.emit(
                    ProposalFinished(
                        iteration=trial.plan.iteration,
                        parent_idx=parent_idx,
                        candidate_idx=trial.candidate_idx,
                        reject_reason=trial.reason,
                        metric_calls=trial.paid,
                        seconds=time.monotonic() - started,
                    )
                )
            for trial in trials:  # the group continuing from a winner may announce itself
                if trial.admitted is None or trial.child is None:
                    continue
                if self.state.contains(trial.child):
                    trial.admitted.set_result(self.state.index_of(trial.child))
                else:
                    trial.admitted.set_exception(ParentNotAdmitted(parent_idx))
            return [trial.record(parent_idx) for trial in trials]
        finally:
            group.release()
            for plan in plans:  # a trial gives its own back; these never ran one
                plan.reservation.release()
                plan.reflections.release()
            if successor is not None and not successor.parent_index.done():
                successor.parent_index.cancel()  # this group failed: its successor must not wait
            if occupied:
                self._occupy(draw, len(plans), -1)
            self._busy[candidate_digest(draw.parent)] -= 1
            del self._group_plans[first]

    def _winners(self, trials: list[Trial]) -> list[Trial]:
        """The children that go on to the valset: every improved one, or the one that
        improved most (ties: the earliest), per GEPAConfig.siblings."""
        improved = [t for t in trials if t.reason is None]
        if self._config.siblings == "all" or not improved:
            return improved
        return [max(improved, key=lambda t: (t.gain, -t.plan.iteration))]

    async def _announce_start(self, plan: Plan, parent_idx: int) -> None:
        await self._events.emit(
            ProposalStarted(
                iteration=plan.iteration,
                parent_idx=parent_idx,
                components=tuple(plan.components),
                minibatch_ids=tuple(i for i, _ in plan.draw.minibatch),
            )
        )

    async def _announce_rejection(self, trial: Trial, parent_idx: int) -> None:
        assert trial.reason is not None
        await self._events.emit(
            ProposalRejected(
                iteration=trial.plan.iteration,
                parent_idx=parent_idx,
                reason=trial.reason,
                parent_minibatch_score=sum(trial.parent_eval.scores),
                child_minibatch_score=None
                if trial.child_eval is None
                else sum(trial.child_eval.scores),
            )
        )

    def _first_improver_wins(self) -> bool:
        """Whether a group stops waiting for reflections once a child has improved
        (`GEPAConfig.siblings`). "auto" does where reflections are the slow stage (their
        measured mean at least twice a metric call's): there a group would wait for the
        slowest of N; elsewhere judging all N picks the better child."""
        mode = self._config.siblings
        if mode != "auto":
            return mode == "first"
        reflection = self._workers.mean_seconds("reflection")
        metric = self._workers.mean_seconds("metric")
        return reflection is not None and metric is not None and reflection >= 2 * metric

    async def _trial(
        self, plan: Plan, parent_eval: EvaluationBatch, outpace: asyncio.Event | None
    ) -> Trial:
        """Lines 9-13 for one child: reflect, evaluate on the minibatch, compare.
        `outpace`, when given, is set by the group's first child that beats the parent."""
        trial = Trial(plan, parent_eval)
        try:
            return await self._judged_trial(trial, outpace)
        finally:  # however it ended, what it did not use goes back now: its group may
            # wait for a winner's valset pass that only this budget can pay for
            plan.reservation.release()
            plan.reflections.release()

    async def _judged_trial(self, trial: Trial, outpace: asyncio.Event | None) -> Trial:
        plan, parent_eval = trial.plan, trial.parent_eval
        config, iteration, parent = self._config, plan.iteration, plan.draw.parent
        if config.skip_perfect_score and all(s >= config.perfect_score for s in parent_eval.scores):
            trial.reason = RejectReason.PERFECT_PARENT
            return trial
        try:
            texts = await self._reflect_unless_outpaced(plan, parent_eval, outpace)
        except CallFailed:
            self._budget.failed_calls += 1
            plan.reflections.charge(plan.reflections.left)  # it was sent: the limit holds
            trial.reason = RejectReason.FAILED_CALLS
            return trial
        if texts is None:
            trial.reason = RejectReason.OUTPACED
            return trial
        proposed = {c: text for c, text in texts.items() if text}
        new = {c: text for c, text in proposed.items() if text != parent[c]}
        changed = {c: t for c, t in new.items() if not self._refused(c, t, parent[c])}
        if not changed:
            trial.reason = (
                RejectReason.REFUSED
                if new
                else RejectReason.UNCHANGED
                if proposed
                else RejectReason.EMPTY_PROPOSAL
            )
            return trial
        trial.child, trial.changed = {**parent, **changed}, tuple(changed)
        if self.state.contains(trial.child):
            trial.reason = RejectReason.DUPLICATE
            return trial
        paid = plan.reservation.left
        try:
            trial.child_eval = await self._evaluate(
                trial.child, Split.TRAIN, plan.draw.minibatch, plan.reservation, iteration
            )
        except CallFailed:
            trial.reason = RejectReason.FAILED_CALLS
            return trial
        finally:
            trial.paid += paid - plan.reservation.left
        self._judged += 1
        if trial.gain <= 0:
            trial.reason = RejectReason.NOT_IMPROVED
            return trial
        self._improved += 1
        if outpace is not None:
            outpace.set()
        return trial

    async def _reflect_unless_outpaced(
        self, plan: Plan, parent_eval: EvaluationBatch, outpace: asyncio.Event | None
    ) -> dict[str, str] | None:
        """The plan's new texts, or None when `outpace` was set (a sibling improved)
        before they came back: the reflection is cancelled then, and counted as sent (it
        may have been), so the reflection limit still holds."""
        if outpace is None:
            return await self._reflect(plan, parent_eval)
        reflecting = asyncio.ensure_future(self._reflect(plan, parent_eval))
        outpaced = asyncio.ensure_future(outpace.wait())
        try:
            await asyncio.wait({reflecting, outpaced}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            outpaced.cancel()
            if not reflecting.done():
                reflecting.cancel()
                await asyncio.wait({reflecting})
        if not reflecting.cancelled():
            return reflecting.result()
        plan.reflections.charge(plan.reflections.left)
        return None

    def _refused(self, component: str, text: str, current: str) -> bool:
        """Whether a proposed text is no candidate (`gepa_opt.refusal`). Demonstrations
        come from their pool, not from the meta-prompt: only the adapter may refuse them."""
        template = self._config.template_for(component)
        restates = component != self._demos_component and restates_meta_prompt(
            text, template, current
        )
        if self._config.refuse_meta_restatements and restates:
            return True
        refuses = getattr(self._adapter, "refuses", None)
        return refuses is not None and refuses(component, text, current) is not None

    async def _blamed(self, plan: Plan, parent_eval: EvaluationBatch) -> list[str] | None:
        """The component the parent's feedback blames, where the selector asks for it;
        not on the demonstrations component's round-robin turn, which it always gets: a
        feedback names the module that failed, and hardly ever its demonstrations."""
        if not isinstance(self._component_selector, BlamedSelector):
            return None
        if self._demos_component in plan.components:
            return None
        blame = await self._adapter.blame(plan.draw.parent, parent_eval)
        return self._component_selector.blamed(self._components, blame)

    async def _reflect(self, plan: Plan, parent_eval: EvaluationBatch) -> dict[str, str]:
        """New texts for the plan's components: the journal's, when a killed run already
        proposed them, else one reflection LM call each, and for a demonstrations
        component the pool's pick (no call); journaled together once all are in."""
        iteration = plan.iteration
        journaled = [key for key in self._reflections if key[0] == iteration]
        if journaled:  # whichever components it proposed for (blame may have chosen)
            return {c: self._reflections.pop((i, c)) for i, c in journaled}
        components = await self._blamed(plan, parent_eval) or plan.components
        reflective = [c for c in components if c in self._reflective]
        texts = {}
        if reflective:
            texts = await propose_texts(
                self._adapter,
                self._reflection_lm,
                plan.draw.parent,
                parent_eval,
                reflective,
                self._config.template_for,
                self._workers,
                priority=_priority(iteration, Split.TRAIN),
            )
        demonstrated = {
            c: self._demonstrate(plan, parent_eval) for c in components if c not in reflective
        }
        if self._journal is not None:
            for component, text in texts.items():
                self._journal.reflected(iteration, component, text)
            for component, text in demonstrated.items():
                self._journal.demonstrated(iteration, component, text)
        if reflective:
            plan.reflections.charge(len(reflective))
            await self._emit_budget(iteration, metric_calls=0, reflection_calls=len(reflective))
        return {c: (texts | demonstrated)[c] for c in components}

    def _demonstrate(self, plan: Plan, parent_eval: EvaluationBatch) -> str:
        """The demonstrations component's next text, from the parent's minibatch scores
        (`demo_proposal.py`); ties are broken by an RNG of the run's seed and the
        proposal's iteration, so a resumed run proposes the same."""
        assert self._demos is not None
        demos = self._demos.demonstrations
        minibatch = [
            (demos.request_of(example), score)
            for (_, example), score in zip(plan.draw.minibatch, parent_eval.scores, strict=True)
        ]
        perfect = self._config.perfect_score
        rng = random.Random(f"gepa:{self._config.seed}:demonstrations:{plan.iteration}")
        return propose_demonstrations(
            self._demos,
            plan.draw.parent[demos.component],
            minibatch,
            demos.passes or (lambda score: score >= perfect),
            rng,
            skip=plan.variant,
        )

    async def _valset_pass(
        self, trial: Trial, valset: Reservation | None
    ) -> EvaluationBatch | RejectReason:
        """Line 14's evaluation: the winner's valset pass (reserved here unless it already
        was), or why there is none."""
        assert trial.child is not None
        valset = valset or await self._reserve_valset(trial.child)
        if valset is None:
            return RejectReason.NO_BUDGET
        reserved = valset.left
        try:
            return await self._evaluate(
                trial.child, Split.VAL, self._val, valset, trial.plan.iteration
            )
        except CallFailed:
            return RejectReason.FAILED_CALLS
        finally:
            trial.paid += reserved - valset.left
            valset.release()

    async def _admit(
        self, trial: Trial, val: EvaluationBatch | RejectReason, parent_idx: int
    ) -> None:
        """Line 14's admission: the winner joins the pool with its valset scores."""
        assert trial.child is not None and trial.child_eval is not None
        plan, child = trial.plan, trial.child
        if isinstance(val, RejectReason):
            trial.reason = val
            await self._announce_rejection(trial, parent_idx)
        elif self.state.contains(child):  # a concurrent proposal wrote the same text first
            trial.reason = RejectReason.DUPLICATE
            await self._announce_rejection(trial, parent_idx)
        else:
            led = aggregate(self.state.val_scores[best_index(self.state.val_scores)])
            trial.candidate_idx = self._add_to_pool(child, (parent_idx,), val)
            self.state.merges_due += 1
            self._admitted += 1
            self._leads += aggregate(self.state.val_scores[trial.candidate_idx]) > led
            await self._events.emit(
                ProposalAccepted(
                    iteration=plan.iteration,
                    parent_idx=parent_idx,
                    candidate_idx=trial.candidate_idx,
                    components=trial.changed,
                    parent_minibatch_score=sum(trial.parent_eval.scores),
                    child_minibatch_score=sum(trial.child_eval.scores),
                    val_score=aggregate(self.state.val_scores[trial.candidate_idx]),
                )
            )
            await self._update_frontier(plan.iteration)

    async def _reserve_valset(self, child: Candidate) -> Reservation | None:
        """A valset pass for an accepted child, once it fits; None if it never can (no
        other work in flight holds metric calls it could give back)."""
        need = self._evaluator.missing(child, Split.VAL, self._val)
        while not self._budget.fits(need):
            if self._budget.reserved == 0:
                return None
            await self._budget.freed()
        return self._budget.reserve(need)

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
        frontier = list(win_counts(self._frontier_scores(), self._config.parent_pruning))
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
            try:
                batch = await self._evaluate(
                    plan.candidate, Split.VAL, subsample, reservation, iteration
                )
                merged = dict(zip(ids, batch.scores, strict=True))
            except CallFailed:  # no subsample scores: not accepted, its parents stay
                merged = {}
            i_scores, j_scores = state.val_scores[plan.i], state.val_scores[plan.j]
            parents_best = max(sum(i_scores[k] for k in ids), sum(j_scores[k] for k in ids))
            candidate_idx = None
            accepted = bool(merged) and merge_accepted(merged, i_scores, j_scores)
            if accepted and not state.contains(plan.candidate):
                try:
                    val = await self._evaluate(
                        plan.candidate, Split.VAL, self._val, reservation, iteration
                    )
                except CallFailed:
                    val = None
                if val is not None and not state.contains(plan.candidate):
                    parents = (plan.i, plan.j)
                    candidate_idx = state.add(plan.candidate, parents, *self._val_results(val))
                    # on from the further of its parents' round robins, as upstream gepa
                    cursors = state.component_cursor
                    cursors[candidate_idx] = max(cursors[plan.i], cursors[plan.j])
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
            best_score=self._best_score if self.state.candidates else None,
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

    async def _evaluate(
        self,
        candidate: Candidate,
        split: Split,
        examples: Sequence[Example],
        reservation: Reservation,
        iteration: int = 0,
    ) -> EvaluationBatch:
        """Its calls wait for slots in the order `_priority` gives."""
        batch, charged = await self._evaluator.evaluate(
            candidate, split, examples, reservation, priority=_priority(iteration, split)
        )
        if charged:  # no save here: the journal already holds every call and answer
            await self._emit_budget(iteration, metric_calls=charged, reflection_calls=0)
        return batch

    # ---- persistence (GEPAConfig.run_dir) ----

    def _rngs(self) -> dict[str, random.Random]:
        return {
            "selection": self._selection_rng,
            "minibatch": self._sampler.rng,
            "merge": self._merge_rng,
        }

    def _save(self) -> None:
        """Persist where the run stands (`checkpoint.py`): a continued group whose parent
        has no index yet is left out (its parent's group re-runs it)."""
        if self._store is None or self._journal is None or not self.state.candidates:
            return
        groups = [
            GroupInFlight(
                plans[0].draw.parent_idx,
                [i for i, _ in plans[0].draw.minibatch],
                [(plan.iteration, plan.components) for plan in plans],
                plans[0].draw.reused,
            )
            for plans in self._group_plans.values()
            if plans[0].draw.known
        ]
        position = Position(
            self._sampler.queue,
            self._best_score,
            self._since_improvement,
            self._journal.offset,
            groups,
        )
        save_run(
            self._store, self.state, self._budget, self._evaluator.cache, self._rngs(), position
        )

    def _resume(self) -> bool:
        """Load the run saved in run_dir and the calls the journal logged after it; True
        when it continues from a saved pool (else only the journal's spend carries over:
        a run killed before the seed's valset pass was saved had paid for it)."""
        if self._store is None or self._journal is None:
            return False
        saved = load_run(self._store, self._seed)
        if saved is None:
            self._reflections = replay_journal(
                self._journal, 0, self._budget, self._evaluator.cache
            )
            return False
        self.state, position = saved.state, saved.position
        self._budget = budget = saved.budget
        budget.max_metric_calls = self._config.max_metric_calls  # a resume may extend it
        budget.max_reflection_calls = self._config.max_reflection_calls
        self._evaluator = Evaluator(
            self._adapter, saved.cache, self._workers, self._journal, self._config.call_attempts
        )
        for name, rng in self._rngs().items():
            rng.setstate(saved.rngs[name].getstate())
        self._sampler.queue = position.sampler_queue
        self._best_score = position.best_score
        self._since_improvement = position.since_improvement
        self._reflections = replay_journal(
            self._journal, position.journal_offset, budget, saved.cache
        )
        for group in position.groups:
            index = asyncio.get_running_loop().create_future()
            index.set_result(group.parent_idx)
            minibatch = [(i, self._train_by_id[i]) for i in group.minibatch]
            parent = self.state.candidates[group.parent_idx]
            draw = Draw(parent, minibatch, index, reused=group.reused)
            self._resumed.append((draw, group.children))
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
            pareto_candidates=tuple(
                win_counts(self._frontier_scores(), self._config.parent_pruning)
            ),
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
            check_objectives(ids, objectives, known, self._config.frontier)
        return scores, objectives


def _priority(iteration: int, split: Split) -> tuple[bool, int]:
    """Which waiting call a freed slot serves: minibatch and reflection work first, the
    oldest proposal's first (the next generation waits on it); then valset passes, the
    newest winner's first (a lineage's newest winner is the one likely to lead the pool,
    and the older passes only order what it leads). Valset passes first instead cost the
    depth benchmark time to quality and utilization ("Where D's time goes" in
    docs/benchmarks/gepa-demo.md)."""
    return (True, -iteration) if split is Split.VAL else (False, iteration)


def _records(outcome: list[ProposalRecord] | MergeTried) -> list[ProposalRecord | MergeTried]:
    return outcome if isinstance(outcome, list) else [outcome]
