"""What a drawn group may spend, reserved before it starts, so the budget is never
overshot at any concurrency.

A group reserves the parent's uncached minibatch and one minibatch per child, for as
many of the shape's N children as fit while a valset pass would still fit after them
(else no child could join the pool and the spend is waste), and each child's reflection
calls. Its iteration numbers are given here too, not in its task: a resumed group keeps
its own (`checkpoint.GroupInFlight`).
"""

from __future__ import annotations

from dataclasses import dataclass

from gepa_opt.budget import Budget, Reservation
from gepa_opt.cache import Split
from gepa_opt.components import ComponentSelector
from gepa_opt.group import Draw, Plan
from gepa_opt.in_flight import GroupsInFlight
from gepa_opt.metric_calls import MetricCalls
from gepa_opt.round_robin import RoundRobin
from gepa_opt.state import GEPAState
from gepa_opt.tuning import Tuning


@dataclass(frozen=True)
class GroupPlanner:
    state: GEPAState
    budget: Budget
    calls: MetricCalls
    tuning: Tuning
    round_robin: RoundRobin
    in_flight: GroupsInFlight
    component_selector: ComponentSelector
    components: list[str]
    reflective: list[str]
    demos_component: str | None
    valset_size: int

    def plan(
        self, draw: Draw, resumed: list[tuple[int, list[str]]] | None = None
    ) -> tuple[Reservation, list[Plan]] | None:
        """The group's reservation (its parent's minibatch) and its children's plans;
        None if not one child fits. A winner's valset pass is reserved once it has won.
        `resumed`: the (iteration, components) of a group that was in flight when the run
        was killed."""
        budget = self.budget
        parent_cost = self.calls.missing(draw.parent, Split.TRAIN, draw.minibatch)
        b = len(draw.minibatch)
        fit = (budget.remaining - parent_cost - self.valset_size) // b
        children = min(self.tuning.shape.children if resumed is None else len(resumed), fit)
        reflections = budget.reflections_left()
        per_child = self.tuning.reflections_per_child()
        if reflections is not None and resumed is None and per_child:  # a resumed group
            children = min(children, reflections // per_child)  # was reserved for
        if children < 1:
            return None
        group = budget.reserve(parent_cost)
        cursor = self.round_robin.position(draw)
        plans: list[Plan] = []
        for k in range(children):
            if resumed is None:
                components, cursor = self.component_selector.select(self.components, cursor)
                self.state.iteration += 1  # reserved here, not in the task: no overshoot
                iteration = self.state.iteration
            else:
                iteration, components = resumed[k]
            reflective = sum(c in self.reflective for c in components)
            hold = budget.reserve_reflections(reflective)
            variant = sum(self.demos_component in plan.components for plan in plans)
            reservation = budget.reserve(b)
            plans.append(Plan(iteration, draw, components, reservation, hold, variant))
        if resumed is None:
            self.round_robin.keep(draw, cursor)
        self.in_flight.start(plans)  # until the group ends or hands its place on
        return group, plans
