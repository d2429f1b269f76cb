"""Lines 5-6 of Algorithm 1: the parent and minibatch of the next group.

A winner's next group comes first (`GEPAConfig.continue_winners`), then the selector's
pick from the Pareto front; an extra group (`in_flight.py`) only from a parent the
in-flight policy allows. Parent picks and minibatches draw on separate seeded streams,
so changing how parents are picked leaves the minibatches alone.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass

from gepa_opt.group import Draw, Trial
from gepa_opt.in_flight import GroupsInFlight, Room
from gepa_opt.pool import Pool
from gepa_opt.sampling import EpochSampler
from gepa_opt.selection import CandidateSelector
from gepa_opt.state import GEPAState
from gepa_opt.tuning import Tuning
from gepa_opt.types import Candidate, DataInst, ExampleId


@dataclass(frozen=True)
class Draws:
    state: GEPAState
    pool: Pool
    in_flight: GroupsInFlight
    tuning: Tuning
    selector: CandidateSelector
    selection_rng: random.Random
    sampler: EpochSampler
    train_by_id: dict[ExampleId, DataInst]
    seed: Candidate
    seed_index: asyncio.Future[int]
    """The seed's pool index, once its valset pass has ended."""

    def next(self, room: Room) -> Draw | None:
        """The next group's draw; None when `room` is "extra" and no parent may take it."""
        continued = self.in_flight.continued
        while room == "core" and continued:
            draw = continued.pop(0)
            if draw.known or not draw.parent_index.done():  # else the winner was not admitted
                return draw
        self.tuning.retune()
        state = self.state
        if not state.candidates:  # the seed's valset pass is running: no front yet
            return self.from_parent(self.seed, self.seed_index) if room == "core" else None
        frontier = self.pool.frontier_scores()
        allowed = None
        if room == "extra":
            front = self.pool.front(frontier)
            busy = self.in_flight.busy(front, state.candidates)
            allowed = self.tuning.policy.extra_parents(front, busy)
        parent_idx = self.selector.select(state.val_scores, self.selection_rng, frontier, allowed)
        if parent_idx is None:
            return None
        index = asyncio.get_running_loop().create_future()
        index.set_result(parent_idx)
        return self.from_parent(state.candidates[parent_idx], index)

    def from_parent(self, parent: Candidate, index: asyncio.Future[int]) -> Draw:
        """`parent` on the next minibatch of the epoch sampler."""
        minibatch = [(i, self.train_by_id[i]) for i in self.sampler.next_batch()]
        return Draw(parent, minibatch, index)

    def continued_from(self, trial: Trial) -> Draw:
        """The winner's next group: on the minibatch it won on where
        `GEPAConfig.reuse_winning_minibatch` says so."""
        assert trial.child is not None and trial.admitted is not None
        draw = trial.plan.draw
        if self.tuning.reuses_minibatch(draw.reused):
            return Draw(trial.child, draw.minibatch, trial.admitted, reused=True)
        return self.from_parent(trial.child, trial.admitted)
