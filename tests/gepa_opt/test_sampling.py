"""Minibatch sampling and component selection."""

import random
from collections import Counter

from gepa_opt.components import AllSelector, RoundRobinSelector
from gepa_opt.sampling import EpochSampler


def test_ids_are_drawn_evenly_and_never_twice_in_a_batch() -> None:
    ids = list(range(7))
    sampler = EpochSampler(ids, 3, random.Random(0))
    drawn: Counter[int] = Counter()
    for _ in range(30):
        batch = sampler.next_batch()
        assert len(batch) == len(set(batch)) == 3
        drawn.update(batch)
        assert max(drawn[i] for i in ids) - min(drawn[i] for i in ids) <= 1


def test_a_trainset_smaller_than_the_minibatch_is_used_whole() -> None:
    sampler = EpochSampler(["a", "b"], 5, random.Random(0))
    assert sorted(sampler.next_batch()) == ["a", "b"]
    assert sorted(sampler.next_batch()) == ["a", "b"]


def test_same_seed_same_batches() -> None:
    def run(seed: int) -> list[list[int]]:
        sampler = EpochSampler(range(10), 4, random.Random(seed))
        return [sampler.next_batch() for _ in range(6)]

    assert run(3) == run(3)
    assert run(3) != run(4)


def test_round_robin_cycles_and_all_takes_everything() -> None:
    components = ["system", "rubric"]
    picked, cursor = [], 0
    for _ in range(5):
        chosen, cursor = RoundRobinSelector().select(components, cursor)
        picked.extend(chosen)
    assert picked == ["system", "rubric", "system", "rubric", "system"]
    assert AllSelector().select(components, 1) == (components, 1)
