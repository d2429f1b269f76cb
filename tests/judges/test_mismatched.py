"""Mismatched replies: a passing reply under another, unlike request is a failing record."""

from __future__ import annotations

import random
from collections import Counter

from judges.lora_records import pointwise_records
from judges.memory import trace_of
from judges.mismatched import mismatched
from judges.types import JudgedItem

WEATHER = [
    ("will it rain in Paris tomorrow", "weather"),
    ("is it cold in Oslo", "the weather in Oslo is cold"),
    ("forecast for Rome on Monday", "weather: sunny in Rome"),
]
PLAYLIST = [
    ("add this song to my road trip playlist", "playlist"),
    ("put Adele on my chill list", "added to your playlist"),
    ("add a tune to girls night", "playlist: girls night"),
]


def passing() -> list[JudgedItem]:
    pairs = WEATHER + PLAYLIST
    return [JudgedItem(f"t{n}", q, a, human_pass=True) for n, (q, a) in enumerate(pairs)]


def test_each_passing_reply_fails_under_a_request_unlike_its_own():
    items = passing()
    kind = {i.id: ("weather" if n < len(WEATHER) else "playlist") for n, i in enumerate(items)}
    moved = mismatched(items, random.Random(0))
    assert [m.output_text for m in moved] == [i.output_text for i in items]
    for original, m in zip(items, moved, strict=True):
        host = trace_of(m)  # a memory never shows the host's own note
        assert m.human_pass is False and m.id.endswith("#mismatched")
        assert host != original.id and kind[host] != kind[original.id]
        assert m.input_text == next(i.input_text for i in items if i.id == host)
    assert mismatched(items, random.Random(0)) == moved  # fixed by seed


def test_too_few_passing_replies_give_none():
    assert mismatched(passing()[:2], random.Random(0)) == []


def test_pointwise_records_add_them_as_failing_records():
    labelled = passing() + [JudgedItem("f0", "play jazz", "I cannot", human_pass=False)]
    plain = pointwise_records("r", labelled, seed=0)
    both = pointwise_records("r", labelled, seed=0, mismatched_replies=True)
    assert Counter(r["completion"][0]["content"] for r in plain) == {"Yes": 6, "No": 6}
    assert Counter(r["completion"][0]["content"] for r in both) == {"Yes": 7, "No": 7}
    failing = [r["prompt"][1]["content"] for r in both if r["completion"][0]["content"] == "No"]
    assert any("<reply>\nweather\n" in p for p in failing)  # passed for its own request only
