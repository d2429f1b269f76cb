"""Mismatched replies: a reply people passed, put under another request, fails.

A judge trained on a few dozen labels can fit them from the reply alone ("a reply naming
a kind passes"), never comparing it with the request or with the reviewers' notes: on
the demo, a judge with a memory passed the bare reply "weather" at P 0.87 where all
three notes said the request was for a playlist. A passing reply moved under a request
whose own passing reply is unlike it answers another request, so it fails whatever the
task (the negative sampling reward models use); as extra failing records they teach the
judge that a reply passes only for its own request.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from sklearn.metrics.pairwise import cosine_similarity

from judges.memory import alike_vectorizer
from judges.types import JudgedItem

SUFFIX = "#mismatched"  # on the id of the request it is put under (`judges.memory.trace_of`)


def mismatched(passing: Sequence[JudgedItem], rng: random.Random) -> list[JudgedItem]:
    """Each passing reply under another passing item's request, drawn from the least
    alike third by request and reply together (TF-IDF cosine: two requests of one kind
    can share no word, their right replies mostly do), labelled fail; none below 3 items."""
    if len(passing) < 3:
        return []
    alike = _cosine([p.input_text for p in passing]) + _cosine([p.output_text for p in passing])
    out = []
    for n, item in enumerate(passing):
        others = sorted((j for j in range(len(passing)) if j != n), key=lambda j: alike[n][j])
        host = passing[rng.choice(others[: max(1, len(others) // 3)])]
        out.append(
            JudgedItem(f"{host.id}{SUFFIX}", host.input_text, item.output_text, human_pass=False)
        )
    return out


def _cosine(texts: list[str]):
    return cosine_similarity(alike_vectorizer().fit_transform(texts))
