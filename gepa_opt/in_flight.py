"""How many proposals run at once, and which may start: depth against breadth.

Proposals come in sibling groups: one parent, one minibatch, N children reflected from
the same evidence (`ProposalShape`: P groups x N children). A group ends when its children
have been judged on the minibatch and its winners' valset passes are done; the next group
then draws its parent from the pool as it is. Work already in flight has the worker slots
first (`WorkerPool` serves the oldest proposal first); what the policy decides is whether
a slot that would still sit idle may start another group beyond the P of the shape:

- "shape": never. Exactly P groups in flight: the search is as deep as the shape says.
- "front": yes, while slots would idle, but only from a parent on the current Pareto
  front that has no group in flight, so an extra group is never a stale sibling of work
  already running (the first groups of a run, drawn while the pool holds only the seed,
  get no company). At most one proposal per worker slot.

`GroupsInFlight` counts what the policy weighs: the groups holding a place, their
proposals, and which parents have a group running.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass
from typing import Literal

from gepa_opt.group import Draw, Plan
from gepa_opt.shape import ProposalShape
from gepa_opt.types import Candidate, candidate_digest

InFlight = Literal["front", "shape"]
Room = Literal["core", "extra"]


@dataclass(frozen=True)
class InFlightPolicy:
    kind: InFlight
    shape: ProposalShape
    max_concurrency: int

    def room(self, groups: int, proposals: int, spare_slot: bool) -> Room | None:
        """Whether another group may start now: one of the shape's P ("core"), one more
        while slots idle ("extra"), or none."""
        if groups < self.shape.parents:
            return "core"
        if (
            self.kind == "front"
            and spare_slot
            and proposals + self.shape.children <= self.max_concurrency
        ):
            return "extra"
        return None

    @staticmethod
    def extra_parents(front: list[int], busy: Counter[int]) -> set[int]:
        """Parents an extra group may take: on the front, with no group in flight."""
        return {k for k in front if not busy[k]}


class GroupsInFlight:
    """The sibling groups running now. A group holds its place of the shape until it
    ends, or until it hands the place on to the group continuing from its winner (that
    group is then `continued`, due next); a parent counts as busy until its group's
    task ends, valset passes included."""

    def __init__(self) -> None:
        self.groups = 0  # groups holding a place of the shape
        self.proposals = 0  # their proposals
        self.plans: dict[int, list[Plan]] = {}  # first iteration -> a group in flight
        self.continued: list[Draw] = []  # winners whose next group is due (continue_winners)
        self.wake = asyncio.Event()  # a group freed its place before its task ended
        self._busy: Counter[str] = Counter()  # parent's digest -> its groups until they end

    def room(self, policy: InFlightPolicy, spare_slot: bool) -> Room | None:
        return policy.room(self.groups, self.proposals, spare_slot)

    def busy(self, front: list[int], candidates: list[Candidate]) -> Counter[int]:
        """Per front candidate, its groups in flight."""
        return Counter({k: self._busy[candidate_digest(candidates[k])] for k in front})

    def start(self, plans: list[Plan]) -> None:
        self._occupy(len(plans), +1)
        self._busy[candidate_digest(plans[0].draw.parent)] += 1
        self.plans[plans[0].iteration] = plans

    def hand_on(self, successor: Draw, plans: list[Plan]) -> None:
        """The group's place goes to `successor`, drawn next."""
        self.continued.append(successor)
        self._occupy(len(plans), -1)
        self.wake.set()

    def end(self, plans: list[Plan], occupied: bool) -> None:
        """`occupied`: the group still held its place (it handed none on)."""
        if occupied:
            self._occupy(len(plans), -1)
        self._busy[candidate_digest(plans[0].draw.parent)] -= 1
        del self.plans[plans[0].iteration]

    def _occupy(self, proposals: int, sign: int) -> None:
        self.groups += sign
        self.proposals += sign * proposals
