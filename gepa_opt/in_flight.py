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
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Literal

from gepa_opt.shape import ProposalShape

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
