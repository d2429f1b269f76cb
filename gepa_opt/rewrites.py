"""Where a proposal's new texts come from (line 10 of Algorithm 1).

The journal's, when a killed run already proposed them: a resumed proposal is then the
same one, and its reflections are not paid twice. Else one reflection LM call per
component it rewrites (`proposer.py`; the component the parent's feedback blames, where
`module_selection="blamed"` asks), and for a demonstrations component the pool's pick,
with no call (`demo_proposal.py`). Every new text is journaled before it is used.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from gepa_opt.announcer import Announcer
from gepa_opt.cache import Split
from gepa_opt.components import BlamedSelector, ComponentSelector
from gepa_opt.config import GEPAConfig
from gepa_opt.demo_proposal import DemoIndex, propose_demonstrations
from gepa_opt.group import Plan
from gepa_opt.journal import CallJournal
from gepa_opt.priority import priority
from gepa_opt.proposer import propose_texts
from gepa_opt.types import Adapter, EvaluationBatch, ReflectionLM
from gepa_opt.workers import WorkerPool


@dataclass(frozen=True)
class Rewriter:
    adapter: Adapter
    reflection_lm: ReflectionLM
    config: GEPAConfig
    components: list[str]
    reflective: list[str]
    """The components a reflection LM rewrites."""
    component_selector: ComponentSelector
    demos: DemoIndex | None
    workers: WorkerPool
    announcer: Announcer
    journal: CallJournal | None
    journaled: dict[tuple[int, str], str]
    """The texts a killed run proposed, by (iteration, component), taken as their
    proposals resume."""

    async def texts(self, plan: Plan, parent_eval: EvaluationBatch) -> dict[str, str]:
        """New texts for the plan's components, journaled together once all are in."""
        iteration = plan.iteration
        journaled = [key for key in self.journaled if key[0] == iteration]
        if journaled:  # whichever components it proposed for (blame may have chosen)
            return {c: self.journaled.pop((i, c)) for i, c in journaled}
        components = await self._blamed(plan, parent_eval) or plan.components
        reflective = [c for c in components if c in self.reflective]
        texts = {}
        if reflective:
            texts = await propose_texts(
                self.adapter,
                self.reflection_lm,
                plan.draw.parent,
                parent_eval,
                reflective,
                self.config.template_for,
                self.workers,
                priority=priority(iteration, Split.TRAIN),
            )
        demonstrated = {
            c: self._demonstrate(plan, parent_eval) for c in components if c not in reflective
        }
        if self.journal is not None:
            for component, text in texts.items():
                self.journal.reflected(iteration, component, text)
            for component, text in demonstrated.items():
                self.journal.demonstrated(iteration, component, text)
        if reflective:
            plan.reflections.charge(len(reflective))
            await self.announcer.budget_used(
                iteration, metric_calls=0, reflection_calls=len(reflective)
            )
        return {c: (texts | demonstrated)[c] for c in components}

    async def _blamed(self, plan: Plan, parent_eval: EvaluationBatch) -> list[str] | None:
        """The component the parent's feedback blames, where the selector asks for it;
        not on the demonstrations component's round-robin turn, which it always gets: a
        feedback names the module that failed, and hardly ever its demonstrations."""
        if not isinstance(self.component_selector, BlamedSelector):
            return None
        demos = None if self.demos is None else self.demos.demonstrations.component
        if demos in plan.components:
            return None
        blame = await self.adapter.blame(plan.draw.parent, parent_eval)
        return self.component_selector.blamed(self.components, blame)

    def _demonstrate(self, plan: Plan, parent_eval: EvaluationBatch) -> str:
        """The demonstrations component's next text, from the parent's minibatch scores;
        ties are broken by an RNG of the run's seed and the proposal's iteration, so a
        resumed run proposes the same."""
        assert self.demos is not None
        demos = self.demos.demonstrations
        minibatch = [
            (demos.request_of(example), score)
            for (_, example), score in zip(plan.draw.minibatch, parent_eval.scores, strict=True)
        ]
        perfect = self.config.perfect_score
        rng = random.Random(f"gepa:{self.config.seed}:demonstrations:{plan.iteration}")
        return propose_demonstrations(
            self.demos,
            plan.draw.parent[demos.component],
            minibatch,
            demos.passes or (lambda score: score >= perfect),
            rng,
            skip=plan.variant,
        )
