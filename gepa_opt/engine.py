"""Algorithm 1 of the GEPA paper, run as batched proposals without a global barrier.

Proposals run in sibling groups (`GEPAConfig.proposal_shape` P x N: P groups, N children
each): a group draws its parent and minibatch from the pool as it is when it starts,
pays the parent's minibatch once, reflects N times, judges each child on the minibatch,
sends its winners (`GEPAConfig.siblings`) to the valset, and the next group starts the
moment one ends (the first groups beside the seed's valset pass: while the pool is empty
they can only draw the seed). All LM-bound calls share one pool of `max_concurrency`
slots, minibatch and reflection work first (`priority.py`); `in_flight.InFlightPolicy`
decides whether slots that would still idle start more groups. A group starts only if
its worst-case cost fits beside the work in flight, so the budget is never overshot.

This file holds the run itself: its parts put together, the seed, and the loop that
keeps groups and merges in flight. What each part does lives in its own module: the
draw (`draws.py`), the reservations (`planning.py`), a group (`group_runner.py`), a
child (`trials.py`, `rewrites.py`), admission (`admission.py`), merges
(`merge_runner.py`), saves and resume (`checkpoint.py`), events (`announcer.py`).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Generic

from gepa_opt.admission import Admission
from gepa_opt.announcer import Announcer
from gepa_opt.budget import Budget, Reservation
from gepa_opt.cache import CacheKey, EvaluationCache, Split
from gepa_opt.checkpoint import Checkpoints, ResumedGroup
from gepa_opt.components import make_component_selector
from gepa_opt.config import GEPAConfig
from gepa_opt.demo_proposal import DemoIndex
from gepa_opt.demonstrations import Demonstrations
from gepa_opt.draws import Draws
from gepa_opt.evaluator import Evaluator
from gepa_opt.events import EventBus, EventHandler, MergeTried, StopReason
from gepa_opt.group import Draw
from gepa_opt.group_runner import GroupRunner
from gepa_opt.in_flight import GroupsInFlight
from gepa_opt.inputs import check_demonstrations, check_seed, identify
from gepa_opt.journal import CallJournal
from gepa_opt.merge_runner import MergeRunner
from gepa_opt.metric_calls import MetricCalls
from gepa_opt.persistence import RunStore
from gepa_opt.planning import GroupPlanner
from gepa_opt.pool import Pool
from gepa_opt.progress import Progress
from gepa_opt.result import GEPAResult
from gepa_opt.rewrites import Rewriter
from gepa_opt.round_robin import RoundRobin
from gepa_opt.sampling import EpochSampler
from gepa_opt.selection import make_candidate_selector
from gepa_opt.shape import ProposalShape
from gepa_opt.state import GEPAState, ProposalRecord
from gepa_opt.stopping import LMUsage
from gepa_opt.trials import TrialRunner
from gepa_opt.tuning import Tuning
from gepa_opt.types import Adapter, CallFailed, Candidate, DataInst, ExampleId, ReflectionLM
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
        self._progress = Progress(config, usage or LMUsage)
        self._seed = dict(seed_candidate)
        self._components = list(seed_candidate)
        self._demos = None if demonstrations is None else DemoIndex(demonstrations)
        self._demos_component = None if demonstrations is None else demonstrations.component
        # the components a reflection LM rewrites: all but the demonstrations
        self._reflective = [c for c in self._components if c != self._demos_component]
        self._train = identify(trainset, example_id, "trainset")
        self._val = identify(valset, example_id, "valset")
        self._adapter = adapter
        self._reflection_lm = reflection_lm
        self._config = config
        self._workers = WorkerPool(config.max_concurrency)
        self._store = RunStore(config.run_dir) if config.run_dir else None
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
        # Saved and resumed by these names, in this order.
        self._rngs = {
            name: random.Random(f"gepa:{config.seed}:{name}")
            for name in ("selection", "minibatch", "merge")
        }
        self._sampler = EpochSampler(
            [i for i, _ in self._train], config.reflection_minibatch_size, self._rngs["minibatch"]
        )
        self._tuning = Tuning(config, self._workers, len(self._val), len(self._reflective))
        self._events = EventBus(on_event)
        # what a resume replaces (`_restore`), before the parts that use them are made
        self.state = GEPAState()
        self._budget = Budget(
            config.max_metric_calls, max_reflection_calls=config.max_reflection_calls
        )
        self._cache = EvaluationCache()
        self._journaled: dict[tuple[int, str], str] = {}  # texts of proposals to resume
        self._unanswered: set[CacheKey] = set()  # paid for by a killed process, unanswered
        self._resumed: list[ResumedGroup] = []

    @property
    def shape(self) -> ProposalShape:
        """The shape in use now ("auto" re-decides it as measurements come in)."""
        return self._tuning.shape

    def shapes_used(self) -> str:
        """Every shape the run used, in order: "2x1" or, for "auto", e.g. "1x1>1x2"."""
        return self._tuning.shapes_used()

    async def run(self) -> GEPAResult:
        started = self._progress.started = time.monotonic()
        self._checkpoints: Checkpoints | None = None
        if self._store is not None:
            journal = CallJournal(self._store.journal_path)
            self._checkpoints = Checkpoints(
                self._store, journal, self._rngs, self._sampler, self._progress
            )
        try:
            resumed = self._restore()
            self._assemble()
            seed = None if resumed else self._start_seed()
            stop = await self._schedule(seed)
        finally:
            if self._checkpoints is not None:
                self._checkpoints.journal.close()
        await self._announcer.run_finished(self.state, stop)
        return GEPAResult.from_state(
            self.state,
            self._budget,
            stop,
            wall_seconds=time.monotonic() - started,
            worker_utilization=self._workers.utilization(),
        )

    def _restore(self) -> bool:
        """Take back what a killed run left in run_dir; True when it continues from a
        saved pool (`checkpoint.Checkpoints.resume`)."""
        if self._checkpoints is None:
            return False
        resumed = self._checkpoints.resume(self._seed, self._budget, self._cache, dict(self._train))
        self._journaled, self._unanswered = resumed.journaled, resumed.unanswered
        if resumed.saved is None:
            return False
        saved = resumed.saved
        self.state, self._budget, self._cache = saved.state, saved.budget, saved.cache
        self._resumed = resumed.groups
        return True

    def _assemble(self) -> None:
        """The run's parts, over the state and budget it starts from (a resume's, if any):
        each is given what it reads and writes, nothing more."""
        config, state, budget, tuning = self._config, self.state, self._budget, self._tuning
        journal = None if self._checkpoints is None else self._checkpoints.journal
        announcer = self._announcer = Announcer(self._events, budget)
        evaluator = Evaluator(
            self._adapter, self._cache, self._workers, journal, config.call_attempts,
            self._unanswered,
        )  # fmt: skip
        calls = self._calls = MetricCalls(evaluator, budget, announcer, self._val)
        round_robin = RoundRobin(state, self._components)
        pool = self._pool = Pool(state, config, [i for i, _ in self._val], round_robin)
        in_flight = self._in_flight = GroupsInFlight()
        self._seed_index: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        draws = self._draws = Draws(
            state, pool, in_flight, tuning, self._selector, self._rngs["selection"],
            self._sampler, dict(self._train), self._seed, self._seed_index,
        )  # fmt: skip
        self._planner = GroupPlanner(
            state, budget, calls, tuning, round_robin, in_flight, self._component_selector,
            self._components, self._reflective, self._demos_component, len(self._val),
        )  # fmt: skip
        rewriter = Rewriter(
            self._adapter, self._reflection_lm, config, self._components, self._reflective,
            self._component_selector, self._demos, self._workers, announcer, journal,
            self._journaled,
        )  # fmt: skip
        trials = TrialRunner(
            config, state, budget, calls, rewriter, tuning, self._adapter, self._demos_component
        )
        admission = Admission(state, pool, calls, tuning, announcer, self._val)
        self._groups = GroupRunner(
            config, state, calls, trials, admission, draws, round_robin, in_flight, tuning,
            announcer,
        )  # fmt: skip
        self._merges = MergeRunner(
            state, config, budget, pool, calls, announcer, self._val, self._rngs["merge"]
        )

    def _start_seed(self) -> asyncio.Task[list[ProposalRecord]]:
        """Lines 2-3 of Algorithm 1, run beside the first groups: while the pool is empty
        they can only draw the seed, so they start at once and wait for its index only to
        join the pool (as a group continued from a winner waits for its parent's). A run
        killed before its first save pays only for the seed's pairs it never sent."""
        need = self._calls.missing(self._seed, Split.VAL, self._val)
        if not self._budget.fits(need):
            used = self._budget.metric_calls_used
            spent = f", {used} calls already made before a kill" if used else ""
            raise ValueError(
                f"GEPAConfig.max_metric_calls={self._budget.max_metric_calls} cannot cover "
                f"the seed's valset evaluation ({len(self._val)} examples{spent})"
            )
        reservation = self._budget.reserve(need)  # before any group's
        return asyncio.create_task(self._add_seed(reservation))

    async def _add_seed(self, reservation: Reservation) -> list[ProposalRecord]:
        """Without the seed's val scores there is no pool: a failed pass ends the run."""
        try:
            val = await self._calls.evaluate(self._seed, Split.VAL, self._val, reservation)
        except CallFailed as error:
            raise CallFailed(f"the seed's valset pass: {error}") from error
        finally:
            reservation.release()
        self._pool.add(self._seed, (), val)
        self._progress.best_score = self._pool.best_score()
        self._seed_index.set_result(0)
        self._save()
        await self._announcer.frontier(self.state.val_scores, self._pool.front(), 0)
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
                if (plans := self._planner.plan(draw, resumed)) is not None:
                    running.add(asyncio.create_task(self._groups.run(*plans)))
            self._resumed.clear()
            while True:
                stop = stop or self._stop_rule()
                while stop is None:
                    room = self._in_flight.room(self._tuning.policy, self._workers.spare())
                    if room is None:
                        break
                    merge = self._merges.plan()
                    if merge is not None:
                        running.add(asyncio.create_task(self._merges.run(merge)))
                        continue
                    pending = pending or self._draws.next(room)
                    if pending is None:
                        break  # no parent an extra group may take
                    plans = self._planner.plan(pending)
                    if plans is None:
                        break
                    running.add(asyncio.create_task(self._groups.run(*plans)))
                    pending = None
                    # saved as soon as it is numbered: a resumed run finishes it, and never
                    # hands its iteration numbers (and journaled reflections) to another
                    self._save()
                if not running:  # nothing in flight, and the next group cannot fit
                    return stop or self._progress.out_of_budget(
                        self._budget, self._tuning.reflections_per_child()
                    )
                wake = {
                    asyncio.ensure_future(self._workers.freed()),
                    asyncio.ensure_future(self._in_flight.wake.wait()),
                }
                done, _ = await asyncio.wait(running | wake, return_when=asyncio.FIRST_COMPLETED)
                for waiter in wake:
                    waiter.cancel()
                done -= wake
                self._in_flight.wake.clear()
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

    def _stop_rule(self) -> StopReason | None:
        """A stop rule that holds now (`GEPAConfig.stop`), or too many failed calls."""
        progress = self._progress
        now = progress.now(self._budget, self.state)
        return self._config.stop.check(now) or progress.too_many_failed(self._budget)

    def _finish(self, record: ProposalRecord | MergeTried) -> StopReason | None:
        stop = self._progress.record(self.state, record)
        self._save()
        return stop

    def _save(self) -> None:
        """Persist where the run stands (`checkpoint.py`)."""
        if self._checkpoints is not None and self.state.candidates:
            self._checkpoints.save(
                self.state, self._budget, self._calls.cache, self._in_flight.plans.values()
            )


def _records(outcome: list[ProposalRecord] | MergeTried) -> list[ProposalRecord | MergeTried]:
    return outcome if isinstance(outcome, list) else [outcome]
