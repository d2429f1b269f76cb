"""Training minibatches: epoch-shuffled so every example gets reflected on equally often."""

from __future__ import annotations

import random
from collections.abc import Sequence

from gepa_opt.types import ExampleId


class EpochSampler:
    """Walks seeded permutations of the train ids, `size` at a time.

    Passes are whole permutations queued back to back, so over time every id is drawn
    equally often. A minibatch straddling two passes takes the next ids of the new pass
    that it does not already hold (skipped ones stay at the front of the queue), so it
    never repeats an id. A trainset smaller than `size` gives all of it each time.
    """

    def __init__(self, ids: Sequence[ExampleId], size: int, rng: random.Random) -> None:
        self._ids = list(ids)
        self._size = min(size, len(self._ids))
        self.rng = rng
        self._queue: list[ExampleId] = []

    @property
    def queue(self) -> list[ExampleId]:
        """Ids not yet drawn from the current passes: with the rng state, all a resume needs."""
        return list(self._queue)

    @queue.setter
    def queue(self, ids: list[ExampleId]) -> None:
        self._queue = list(ids)

    def next_batch(self) -> list[ExampleId]:
        if len(self._queue) < self._size:
            next_pass = list(self._ids)
            self.rng.shuffle(next_pass)
            self._queue.extend(next_pass)
        batch: list[ExampleId] = []
        rest: list[ExampleId] = []
        for position, example_id in enumerate(self._queue):
            if len(batch) == self._size:
                rest.extend(self._queue[position:])
                break
            (rest if example_id in batch else batch).append(example_id)
        self._queue = rest
        return batch
