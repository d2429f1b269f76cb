"""Lines 7-14 of Algorithm 1 for one sibling group: N children of one parent on one
minibatch (`group.py` holds its pieces).

The group pays the parent's minibatch once, judges its children side by side
(`trials.py`), sends its winners (`GEPAConfig.siblings`) to the valset and, with
`continue_winners`, hands its place at once to the group continuing from its winner,
so the next generation does not wait for a valset pass. A continued group's parent may
still be in its own valset pass: its proposals are announced, and its winners join the
pool, only once that parent has.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from gepa_opt.admission import Admission
from gepa_opt.announcer import Announcer
from gepa_opt.budget import Reservation
from gepa_opt.cache import Split
from gepa_opt.config import GEPAConfig
from gepa_opt.draws import Draws
from gepa_opt.events import RejectReason
from gepa_opt.group import Draw, ParentNotAdmitted, Plan, Trial
from gepa_opt.in_flight import GroupsInFlight
from gepa_opt.metric_calls import MetricCalls
from gepa_opt.round_robin import RoundRobin
from gepa_opt.state import GEPAState, ProposalRecord
from gepa_opt.trials import TrialRunner
from gepa_opt.tuning import Tuning
from gepa_opt.types import CallFailed, EvaluationBatch


@dataclass(frozen=True)
class GroupRunner:
    config: GEPAConfig
    state: GEPAState
    calls: MetricCalls
    trials: TrialRunner
    admission: Admission
    draws: Draws
    round_robin: RoundRobin
    in_flight: GroupsInFlight
    tuning: Tuning
    announcer: Announcer
    _announcing: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)
    """Held while a group announces its proposals late (a continued group, once its
    parent is admitted) or its rejections: in one piece, or the events would show more
    proposals in flight than there were."""

    async def run(self, group: Reservation, plans: list[Plan]) -> list[ProposalRecord]:
        """The group's proposals, once each has ended; `group`: its parent's minibatch."""
        draw, first = plans[0].draw, plans[0].iteration
        started = time.monotonic()
        occupied = True
        announced = draw.known  # a continued group's parent has no index yet
        successor: Draw | None = None
        try:
            if announced:
                for plan in plans:
                    await self.announcer.started(plan, draw.parent_idx)
            paid = group.left
            try:
                parent_eval = await self.calls.evaluate(
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
                outpace = asyncio.Event() if self.tuning.first_improver_wins() else None
                async with asyncio.TaskGroup() as tasks:
                    running = [
                        tasks.create_task(self.trials.trial(plan, parent_eval, outpace))
                        for plan in plans
                    ]
                trials = [task.result() for task in running]
            trials[0].paid += paid
            winners = self._winners(trials)
            for trial in winners:
                assert trial.child is not None
                self.round_robin.hand_on(trial.child, trial.plan)
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
                handed_on = self.draws.from_parent(draw.parent, draw.parent_index)
            if self.config.continue_winners and len(winners) == 1:
                (trial,) = winners
                valset = await self.calls.reserve_valset(trial.child)
                if valset is None:
                    trial.reason, admissions = RejectReason.NO_BUDGET, []
                else:  # the winner's next group starts now, beside its valset pass
                    admissions = [(trial, valset)]
                    trial.admitted = asyncio.get_running_loop().create_future()
                    handed_on = successor = self.draws.continued_from(trial)
            if handed_on is not None:  # this group's place goes to it
                self.in_flight.hand_on(handed_on, plans)
                occupied = False
            # the winners' valset passes start now; only joining the pool waits for the
            # parent's index, so a lineage's passes run side by side, not one after another
            async with asyncio.TaskGroup() as tasks:
                passes = [
                    tasks.create_task(self.admission.valset_pass(*admission))
                    for admission in admissions
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
                            await self.announcer.started(trial.plan, parent_idx)
                        if trial.reason is not None:
                            await self.announcer.rejected(trial, parent_idx)
            for (trial, _), done in zip(admissions, passes, strict=True):
                await self.admission.admit(trial, done.result(), parent_idx)
            for trial in trials:
                await self.announcer.finished(trial, parent_idx, time.monotonic() - started)
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
            self.in_flight.end(plans, occupied)

    def _winners(self, trials: list[Trial]) -> list[Trial]:
        """The children that go on to the valset: every improved one, or the one that
        improved most (ties: the earliest), per GEPAConfig.siblings."""
        improved = [t for t in trials if t.reason is None]
        if self.config.siblings == "all" or not improved:
            return improved
        return [max(improved, key=lambda t: (t.gain, -t.plan.iteration))]
