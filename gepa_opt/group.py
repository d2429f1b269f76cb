"""A sibling group's pieces: its draw (parent, minibatch), each child's plan, each
child's trial on the minibatch (see `group_runner.py` for how they run)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from gepa_opt.budget import ReflectionHold, Reservation
from gepa_opt.evaluator import Example
from gepa_opt.events import RejectReason
from gepa_opt.state import ProposalRecord
from gepa_opt.types import Candidate, EvaluationBatch


class ParentNotAdmitted(Exception):
    """A continued group's parent, a winner, never joined the pool (its valset pass
    failed): the group's children have no parent to be recorded under but its
    `lineage`, the winner's own parent."""

    def __init__(self, lineage: int) -> None:
        super().__init__(f"the winner from candidate {lineage} was not admitted")
        self.lineage = lineage


@dataclass(frozen=True)
class Draw:
    """The next group's parent and minibatch. A continued group's parent is a winner whose
    valset pass is still running: its pool index is known once that pass is done."""

    parent: Candidate
    minibatch: list[Example]
    parent_index: asyncio.Future[int]
    reused: bool = False
    """The minibatch is the one the parent won on (`GEPAConfig.reuse_winning_minibatch`)."""

    @property
    def known(self) -> bool:
        """The parent's pool index is known (a continued group's: once it was admitted)."""
        index = self.parent_index
        return index.done() and not index.cancelled() and index.exception() is None

    @property
    def parent_idx(self) -> int:
        return self.parent_index.result()


@dataclass(frozen=True)
class Plan:
    """One proposal of a group: its iteration number, components and reserved budget
    (the child's minibatch, the parent's being the group's; its reflections)."""

    iteration: int
    draw: Draw
    components: list[str]
    reservation: Reservation
    reflections: ReflectionHold
    variant: int = 0
    """Earlier children of its group that also change the demonstrations component
    (`gepa_opt.demonstrations`): this one passes over as many best matches per failure,
    or siblings would all propose the same child."""


@dataclass
class Trial:
    """A proposal judged on its minibatch: the child, or why it went no further."""

    plan: Plan
    parent_eval: EvaluationBatch
    child: Candidate | None = None
    changed: tuple[str, ...] = ()
    child_eval: EvaluationBatch | None = None
    reason: RejectReason | None = None
    paid: int = 0
    """Metric calls paid for this proposal (the group's parent minibatch: its first)."""
    candidate_idx: int | None = None
    admitted: asyncio.Future[int] | None = None
    """Set when a group continues from this winner: its pool index, once it has one."""

    @property
    def gain(self) -> float:
        assert self.child_eval is not None
        return sum(self.child_eval.scores) - sum(self.parent_eval.scores)

    def record(self, parent_idx: int) -> ProposalRecord:
        plan = self.plan
        return ProposalRecord(
            iteration=plan.iteration,
            parent_idx=parent_idx,
            components=tuple(plan.components),
            minibatch_ids=tuple(i for i, _ in plan.draw.minibatch),
            parent_scores=tuple(self.parent_eval.scores),
            child_scores=None if self.child_eval is None else tuple(self.child_eval.scores),
            reject_reason=self.reason,
            candidate_idx=self.candidate_idx,
            metric_calls=self.paid,
        )
