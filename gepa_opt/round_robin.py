"""Where each parent's round robin over components stands (`GEPAConfig.module_selection`).

A pool candidate's position is run state (`GEPAState.component_cursor`), saved and
resumed with the pool. A parent not in the pool yet has no place there (the seed during
its valset pass, a winner during its own), yet the groups drawn from it meanwhile must
still take turns, so its position is kept by digest until it joins (`take`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gepa_opt.group import Draw, Plan
from gepa_opt.state import GEPAState
from gepa_opt.types import Candidate, candidate_digest


@dataclass(frozen=True)
class RoundRobin:
    state: GEPAState
    components: list[str]
    _waiting: dict[str, int] = field(default_factory=dict, init=False)
    """By digest: the positions of parents not in the pool yet."""

    def position(self, draw: Draw) -> int:
        """Where the parent's round robin resumes: a winner goes on from where its
        parent's proposal of it left off (`hand_on`), and its groups drawn before it
        joined the pool carry their position over to it."""
        if draw.known:
            return self.state.component_cursor[draw.parent_idx]
        return self._waiting.get(candidate_digest(draw.parent), 0)

    def keep(self, draw: Draw, cursor: int) -> None:
        """The position the parent's newly planned group reached."""
        if draw.known:
            self.state.component_cursor[draw.parent_idx] = cursor
        else:
            self._waiting[candidate_digest(draw.parent)] = cursor

    def hand_on(self, child: Candidate, plan: Plan) -> None:
        """A winner starts its round robin at the component after the one its parent's
        proposal changed, as upstream gepa does. Starting every child at the first
        component would give the later ones no turn in a lineage of winners: a
        demonstrations component after the instructions would never be proposed while
        instruction rewrites kept winning."""
        after = (self.components.index(plan.components[-1]) + 1) % len(self.components)
        self._waiting.setdefault(candidate_digest(child), after)

    def take(self, candidate: Candidate) -> int:
        """A newcomer's position, as its first groups left it (0 if none was drawn)."""
        return self._waiting.pop(candidate_digest(candidate), 0)
