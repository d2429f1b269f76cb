"""Lines 9-13 of Algorithm 1 for one child of a group: its texts, its evaluation on the
group's minibatch, its comparison with the parent there.

Each way a child can go no further is a `RejectReason` set here, before any metric call
it would waste: a perfect parent, a failed or outpaced reflection, nothing new, a
refused text (`refusal.py`), a candidate the pool already holds.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from gepa_opt.budget import Budget
from gepa_opt.cache import Split
from gepa_opt.config import GEPAConfig
from gepa_opt.events import RejectReason
from gepa_opt.group import Plan, Trial
from gepa_opt.metric_calls import MetricCalls
from gepa_opt.refusal import refused
from gepa_opt.rewrites import Rewriter
from gepa_opt.state import GEPAState
from gepa_opt.tuning import Tuning
from gepa_opt.types import Adapter, CallFailed, EvaluationBatch


@dataclass(frozen=True)
class TrialRunner:
    config: GEPAConfig
    state: GEPAState
    budget: Budget
    calls: MetricCalls
    rewriter: Rewriter
    tuning: Tuning
    adapter: Adapter
    demos_component: str | None

    async def trial(
        self, plan: Plan, parent_eval: EvaluationBatch, outpace: asyncio.Event | None
    ) -> Trial:
        """`outpace`, when given, is set by the group's first child that beats the parent."""
        trial = Trial(plan, parent_eval)
        try:
            return await self._judged(trial, outpace)
        finally:  # however it ended, what it did not use goes back now: its group may
            # wait for a winner's valset pass that only this budget can pay for
            plan.reservation.release()
            plan.reflections.release()

    async def _judged(self, trial: Trial, outpace: asyncio.Event | None) -> Trial:
        plan, parent_eval = trial.plan, trial.parent_eval
        config, iteration, parent = self.config, plan.iteration, plan.draw.parent
        if config.skip_perfect_score and all(s >= config.perfect_score for s in parent_eval.scores):
            trial.reason = RejectReason.PERFECT_PARENT
            return trial
        try:
            texts = await self._texts_unless_outpaced(plan, parent_eval, outpace)
        except CallFailed:
            self.budget.failed_calls += 1
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
            trial.child_eval = await self.calls.evaluate(
                trial.child, Split.TRAIN, plan.draw.minibatch, plan.reservation, iteration
            )
        except CallFailed:
            trial.reason = RejectReason.FAILED_CALLS
            return trial
        finally:
            trial.paid += paid - plan.reservation.left
        self.tuning.judged += 1
        if trial.gain <= 0:
            trial.reason = RejectReason.NOT_IMPROVED
            return trial
        self.tuning.improved += 1
        if outpace is not None:
            outpace.set()
        return trial

    def _refused(self, component: str, text: str, current: str) -> bool:
        return refused(component, text, current, self.config, self.adapter, self.demos_component)

    async def _texts_unless_outpaced(
        self, plan: Plan, parent_eval: EvaluationBatch, outpace: asyncio.Event | None
    ) -> dict[str, str] | None:
        """The plan's new texts, or None when `outpace` was set (a sibling improved)
        before they came back: the reflection is cancelled then, and counted as sent (it
        may have been), so the reflection limit still holds."""
        if outpace is None:
            return await self.rewriter.texts(plan, parent_eval)
        reflecting = asyncio.ensure_future(self.rewriter.texts(plan, parent_eval))
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
