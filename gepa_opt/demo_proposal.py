"""How a demonstrations component changes: by the parent's minibatch, with no LM call.

The evidence is what the parent scored on its minibatch. Each example it failed (lowest
score first) gets the pool's demonstrations most like its request (TF-IDF cosine), if not
shown already: the cheapest fix for a failure is an example of it done right. When that
would exceed the token budget, the shown demonstrations the evidence speaks least for go
out: a demonstration counts for itself by resembling the examples the parent passed (it
may be why) and against itself by resembling those it failed (it was there, and did not
prevent it; a near request of another kind misleads), each by its cosine. One that
resembles none has no evidence either way, so it goes after the failures' neighbours and
before the passes'. What stays keeps its place, additions come last.

Pure functions of the parent's text, its minibatch and a seeded RNG that only breaks
ties: the same run seed and iteration give the same proposal, in a resumed run too.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from gepa_opt.demonstrations import Demo, Demonstrations


class DemoIndex:
    """The pool's requests as TF-IDF vectors, fitted once per run on the pool: words no
    demonstration uses say nothing about which one to show."""

    def __init__(self, demonstrations: Demonstrations) -> None:
        # imported here: scikit-learn takes a second or more to load, and a run without
        # demonstrations never needs it
        from sklearn.feature_extraction.text import TfidfVectorizer

        self.demonstrations = demonstrations
        unique: dict[str, Demo] = {}
        for demo in demonstrations.pool:
            unique.setdefault(demo.text, demo)
        self.by_text = unique
        self.pool = tuple(unique.values())
        # every word counts, one letter long too: requests are short
        self._vectorizer = TfidfVectorizer(sublinear_tf=True, token_pattern=r"(?u)\b\w+\b")
        try:
            self._matrix = self._vectorizer.fit_transform([d.request for d in self.pool])
        except ValueError as error:  # no word in any request
            raise ValueError(
                f"Demonstrations.pool: no request has a word to compare ({error})"
            ) from error

    def vectors(self, texts: Sequence[str]) -> Any:
        """Unit-length rows, one per text: their dot products are cosines."""
        return self._vectorizer.transform(list(texts))

    def similarity_to_pool(self, texts: Sequence[str]) -> Any:
        """Cosine of each text (rows) to each pool demonstration (columns), dense."""
        return (self.vectors(texts) @ self._matrix.T).toarray()

    def request_of_line(self, line: str) -> str:
        """What a shown line answers: its demonstration's request, or for a line the
        pool does not hold (the seed's own), the line itself."""
        demo = self.by_text.get(line)
        return line if demo is None else demo.request


def propose_demonstrations(
    index: DemoIndex,
    current: str,
    minibatch: Sequence[tuple[str, float]],
    passes: Callable[[float], bool],
    rng: random.Random,
    skip: int = 0,
) -> str:
    """The child's text of the demonstrations component: `current` with demonstrations
    added for the failures of `minibatch` (each example's request and the parent's score,
    a failure where `passes` says so) and, to stay within the budget, the least useful
    dropped. `current` itself, verbatim, when nothing is added or dropped (and it fits).
    `skip`: how many of each failure's best matches to pass over, so that siblings
    proposed from one parent and minibatch differ."""
    demos = index.demonstrations
    shown = list(dict.fromkeys(line.strip() for line in current.splitlines() if line.strip()))
    requests = [request for request, _ in minibatch]
    scores = [score for _, score in minibatch]
    passed = [passes(score) for score in scores]
    added = _additions(index, shown, requests, scores, passed, rng, skip)
    credit = _credit(index, shown, requests, passed)
    order = added + sorted(shown, key=lambda line: (-credit[line], shown.index(line)))

    def render(chosen: list[str]) -> str:
        return "\n".join(line for line in [*shown, *added] if line in chosen)

    kept: list[str] = []
    for line in order:
        if demos.count_tokens(render([*kept, line])) <= demos.max_tokens:
            kept.append(line)
    if set(kept) == set(shown) and demos.count_tokens(current) <= demos.max_tokens:
        return current
    return render(kept)


def _additions(
    index: DemoIndex,
    shown: list[str],
    requests: list[str],
    scores: list[float],
    passed: list[bool],
    rng: random.Random,
    skip: int,
) -> list[str]:
    """Per failing example, lowest score first, its most similar pool demonstrations that
    are not shown yet, resemble it at all, and answer no request of the minibatch."""
    failing = sorted((i for i, ok in enumerate(passed) if not ok), key=lambda i: (scores[i], i))
    if not failing:
        return []
    per_failure = index.demonstrations.per_failure
    similarity = index.similarity_to_pool(requests)
    ties = [rng.random() for _ in index.pool]
    asked = {_normal(request) for request in requests}
    taken = set(shown)
    added: list[str] = []
    for i in failing:
        ranked = sorted(range(len(index.pool)), key=lambda j: (-similarity[i, j], ties[j]))
        eligible = [
            index.pool[j].text
            for j in ranked
            if similarity[i, j] > 0
            and index.pool[j].text not in taken
            and _normal(index.pool[j].request) not in asked
        ]
        for text in eligible[skip * per_failure : (skip + 1) * per_failure]:
            added.append(text)
            taken.add(text)
    return added


def _credit(
    index: DemoIndex, shown: list[str], requests: list[str], passed: list[bool]
) -> dict[str, float]:
    """Per shown line, its resemblance to the minibatch's passes less that to its failures."""
    if not shown:
        return {}
    lines = index.vectors([index.request_of_line(line) for line in shown])
    similarity = (lines @ index.vectors(requests).T).toarray()
    signs = [1.0 if ok else -1.0 for ok in passed]
    return {line: float(similarity[k] @ signs) for k, line in enumerate(shown)}


def _normal(request: str) -> str:
    return " ".join(request.casefold().split())
