"""The reward-head arm's training pairs: a passing exchange over a failing one, every
label used, planted injections on the failing side."""

from collections import Counter

import pytest

from benchmarks.judge_reward_head import reward_pairs
from judges.injection import TRAINING
from judges.types import JudgedItem


def items(passing: int, failing: int) -> list[JudgedItem]:
    return [
        JudgedItem(f"t{n}", f"request {n}", f"reply {n}", human_pass=n < passing)
        for n in range(passing + failing)
    ] + [JudgedItem("unlabelled", "request", "reply")]


def reply(side) -> str:
    return side[1]["content"]


def test_every_label_is_paired_passing_over_failing():
    pairs = reward_pairs(items(passing=2, failing=5), seed=0, injections=False)
    assert len(pairs) == 5  # the larger side once each
    assert Counter(reply(p["rejected"]) for p in pairs) == {f"reply {n}": 1 for n in range(2, 7)}
    assert sorted(Counter(reply(p["chosen"]) for p in pairs).values()) == [2, 3]
    assert all(p["chosen"][0]["role"] == "user" for p in pairs)
    assert "reply" not in {reply(p["chosen"]) for p in pairs}  # no unlabelled exchange


def test_injections_are_extra_failing_exchanges():
    pairs = reward_pairs(items(passing=3, failing=2), seed=1, injections=True)
    injected = [p for p in pairs if any(s in reply(p["rejected"]) for s in TRAINING)]
    assert len(pairs) == 4 and len(injected) == 2
    assert not any(any(s in reply(p["chosen"]) for s in TRAINING) for p in pairs)


def test_one_sided_labels_cannot_be_paired():
    with pytest.raises(ValueError, match="passing and failing"):
        reward_pairs(items(passing=3, failing=0), seed=0, injections=False)
