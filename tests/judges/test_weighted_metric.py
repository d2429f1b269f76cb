"""Several criteria as one agent metric: the primary's score and the weighted criteria's,
averaged by weight; the feedback stays the primary's."""

import pytest

from judges.types import JudgedItem
from judges.weighted_metric import WeightedMetric

ITEMS = [JudgedItem("a", "hi", "hello"), JudgedItem("b", "hi", "go away")]


class Fixed:
    """A judge that gives each item a fixed score (None: its call failed for good)."""

    def __init__(self, scores, why="", cut=0.5):
        self.scores, self.why, self.cut, self.unparseable = scores, why, cut, 1

    async def p_pass_many(self, items):
        return [self.scores[item.id] for item in items]

    async def rationale(self, item):
        return self.why

    async def choice_probabilities(self, item, question, choices):
        return [1.0] + [0.0] * (len(choices) - 1)

    def passes(self, score):
        return score >= self.cut


async def test_the_objective_is_the_weighted_mean_of_the_primary_and_the_criteria():
    primary = Fixed({"a": 1.0, "b": 0.6}, why="right intent")
    polite, concise = Fixed({"a": 1.0, "b": 0.0}), Fixed({"a": 0.5, "b": 0.5})
    metric = WeightedMetric(primary, [(polite, 0.5), (concise, 0.5)])
    scores = await metric.p_pass_many(ITEMS)
    # (1 + 0.5 * 1 + 0.5 * 0.5) / 2 and (0.6 + 0 + 0.25) / 2
    assert scores == pytest.approx([0.875, 0.425])
    # the rude reply ranks lower than the primary alone ranked it
    assert scores[1] < (await primary.p_pass_many(ITEMS))[1]
    assert await metric.rationale(ITEMS[0]) == "right intent"
    assert metric.passes(0.5) and not metric.passes(0.4)
    assert metric.unparseable == 3


async def test_a_failed_criterion_call_leaves_the_reply_unscored():
    metric = WeightedMetric(Fixed({"a": 1.0, "b": 1.0}), [(Fixed({"a": None, "b": 0.5}), 1.0)])
    assert await metric.p_pass_many(ITEMS) == [None, 0.75]


def test_a_weight_of_zero_is_no_part_of_the_objective():
    with pytest.raises(ValueError, match="weight 0"):
        WeightedMetric(Fixed({}), [(Fixed({}), 0.0)])
