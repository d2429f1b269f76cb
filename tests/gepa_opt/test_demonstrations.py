"""How a demonstrations component changes by the evidence (`gepa_opt.demo_proposal`): the
failures' nearest demonstrations in, the least useful out at the budget, never over it."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gepa_opt import Demo, Demonstrations, chars_over_four
from gepa_opt.demo_proposal import DemoIndex, propose_demonstrations

POOL = (
    Demo("play some jazz by miles davis", "play some jazz by miles davis => music"),
    Demo("play the latest album by adele", "play the latest album by adele => music"),
    Demo(
        "what is the weather in paris tomorrow", "what is the weather in paris tomorrow => weather"
    ),
    Demo("will it rain in berlin", "will it rain in berlin => weather"),
    Demo("book a table for two at an italian place", "book a table for two => restaurant"),
)


def lines(text: str) -> int:
    """A budget in lines: each demonstration costs one token."""
    return len(text.splitlines())


def index(max_tokens: int = 100, count=chars_over_four, per_failure: int = 1, pool=POOL):
    return DemoIndex(Demonstrations("examples", pool, max_tokens, count, str, per_failure))


def propose(idx: DemoIndex, current: str, minibatch, skip: int = 0, seed: int = 0) -> str:
    return propose_demonstrations(idx, current, minibatch, passes, random.Random(seed), skip)


def passes(score: float) -> bool:
    return score >= 1.0


def test_a_failing_example_gets_the_pool_s_most_similar_demonstration() -> None:
    child = propose(index(), "", [("play a jazz record by coltrane", 0.0), ("rain in rome", 1.0)])
    assert child == "play some jazz by miles davis => music"  # the passed example gets none


def test_it_is_added_after_what_the_parent_shows_and_each_failure_gets_its_own() -> None:
    parent = "will it rain in berlin => weather"
    minibatch = [("will it rain in madrid", 0.0), ("play the new album by muse", 0.0)]
    child = propose(index(), parent, minibatch)
    # the weather failure's best match is shown already: it gets the next one
    assert child.splitlines() == [
        parent,
        "what is the weather in paris tomorrow => weather",
        "play the latest album by adele => music",
    ]


def test_the_demonstration_of_a_minibatch_request_itself_is_never_added() -> None:
    child = propose(index(), "", [("play some jazz by miles davis", 0.0)])
    assert child == "play the latest album by adele => music"


def test_siblings_pass_over_the_best_matches_their_elders_took() -> None:
    minibatch = [("play a jazz record by coltrane", 0.0)]
    assert propose(index(), "", minibatch, skip=0) != propose(index(), "", minibatch, skip=1)
    assert propose(index(), "", minibatch, skip=1) == "play the latest album by adele => music"


def test_over_budget_the_line_resembling_nothing_goes_before_one_resembling_a_pass() -> None:
    idx = index(max_tokens=2, count=lines)
    parent = "will it rain in berlin => weather\nbook a table for two => restaurant"
    minibatch = [("will it rain in madrid", 1.0), ("play a jazz record by coltrane", 0.0)]
    child = propose(idx, parent, minibatch)
    assert child.splitlines() == [
        "will it rain in berlin => weather",  # near the example the parent passed: kept
        "play some jazz by miles davis => music",  # swapped in for the failure
    ]


def test_over_budget_a_line_resembling_a_failure_goes_first() -> None:
    idx = index(max_tokens=2, count=lines)
    # the parent showed a weather line near the music request it failed: it misled
    parent = "book a table for two => restaurant\nplay jazz in the rain => weather"
    minibatch = [("play a jazz record by coltrane", 0.0)]
    child = propose(idx, parent, minibatch)
    assert child.splitlines() == [
        "book a table for two => restaurant",
        "play some jazz by miles davis => music",
    ]


def test_nothing_to_add_and_within_budget_is_the_parent_itself() -> None:
    parent = "  will it rain in berlin => weather\n\n"
    assert propose(index(), parent, [("will it rain in madrid", 1.0)]) == parent
    # a failure no demonstration resembles adds nothing either
    assert propose(index(), parent, [("zzz qqq", 0.0)]) == parent


def test_a_parent_over_its_budget_is_trimmed_even_with_nothing_to_add() -> None:
    parent = "\n".join(d.text for d in POOL)
    child = propose(index(max_tokens=3, count=lines), parent, [("will it rain in madrid", 1.0)])
    kept = child.splitlines()
    assert len(kept) == 3 and kept == [line for line in parent.splitlines() if line in kept]
    assert {"will it rain in berlin => weather", POOL[2].text} < set(kept)  # near the pass


def test_what_passes_is_the_caller_s_cut() -> None:
    minibatch = [("play a jazz record by coltrane", 0.7), ("rain in rome", 0.2)]
    judged = propose_demonstrations(index(), "", minibatch, lambda p: p >= 0.5, random.Random(0), 0)
    assert judged == "will it rain in berlin => weather"  # 0.7 passed: only 0.2 failed
    assert len(propose(index(), "", minibatch).splitlines()) == 2  # short of 1.0, both fail


def test_per_failure_adds_that_many_for_each() -> None:
    child = propose(index(per_failure=2), "", [("play a jazz record by coltrane", 0.0)])
    assert child.splitlines() == [
        "play some jazz by miles davis => music",
        "play the latest album by adele => music",
    ]


@settings(max_examples=60, deadline=None)
@given(
    shown=st.lists(st.sampled_from([d.text for d in POOL] + ["seed line => weather"])),
    scores=st.lists(st.sampled_from([0.0, 0.3, 1.0]), min_size=1, max_size=4),
    budget=st.integers(1, 60),
    seed=st.integers(0, 3),
)
def test_never_over_the_budget_and_the_same_for_a_seed(shown, scores, budget, seed) -> None:
    idx = index(max_tokens=budget)
    requests = ["play a jazz record", "rain in rome", "a table for four", "adele album"]
    minibatch = list(zip(requests, scores, strict=False))
    child = propose(idx, "\n".join(shown), minibatch, seed=seed)
    assert chars_over_four(child) <= budget
    assert child == propose(idx, "\n".join(shown), minibatch, seed=seed)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"component": ""}, "component"),
        ({"pool": ()}, "pool"),
        ({"pool": ("a => b",)}, r"pool\[0\]"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"per_failure": 0}, "per_failure"),
    ],
)
def test_a_bad_knob_is_named(kwargs, field) -> None:
    with pytest.raises(ValueError, match=f"Demonstrations.{field}"):
        Demonstrations(**({"component": "examples", "pool": POOL} | kwargs))


def test_a_demo_is_one_line_answering_a_request() -> None:
    with pytest.raises(ValueError, match="Demo.text"):
        Demo("play jazz", "play jazz\n=> music")
    with pytest.raises(ValueError, match="Demo.request"):
        Demo("  ", "=> music")
