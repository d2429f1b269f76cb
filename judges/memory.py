"""A judge's memory: the reviewers' notes on the labelled requests most like the one it
judges, shown in its prompt (after MLflow's MemAlign, whose episodic memory does the same).

What people decide often turns on a fact the request alone does not give a small model:
on the demo, whether the reply named the request's true kind. The notes on similar
requests give it ("correct: weather", "expected playlist"): a reader comparing the reply
with its three nearest notes perfectly would agree with the held-out labels at kappa 0.95
to 1.0 on the demo's splits 0-2. The base 135M model cannot read them; the judge's LoRA
step trains on this prompt (`judges.judge_lora`), so the version is rubric, adapter and
memory together.

Requests are matched by TF-IDF cosine (scikit-learn): requests of one kind share words
("playlist", "book a"). An exchange never sees a note on its own trace, nor on a planted
copy of it (`judges.injection.planted` suffixes the copy's id), so neither training nor
measuring shows a judge its own label.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.metrics.pairwise import cosine_similarity

from judges.judged_text import as_data
from judges.types import JudgedItem

INTRO = "Reviewers' notes on the most alike requests:"
FILE = "judge_memory.json"  # in the folder of the adapter trained on it


def trace_of(item: JudgedItem) -> str:
    """The trace an item came from (a planted copy's id is its original's plus "#...")."""
    return item.id.split("#", 1)[0]


def alike_vectorizer() -> TfidfVectorizer:
    """How texts are compared here: word unigrams and bigrams, sublinear (a word said
    twice is not twice the evidence)."""
    return TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)


def note(item: JudgedItem) -> str:
    verdict = "pass" if item.human_pass else "fail"
    comment = f": {item.human_comment.strip()}" if item.human_comment.strip() else ""
    return f"- {as_data('request', item.input_text)} {verdict}{comment}"


class ReviewedMemory:
    """Labelled exchanges, looked up by how alike their requests are."""

    def __init__(self, reviewed: Sequence[JudgedItem], k: int):
        reviewed = [i for i in reviewed if i.human_pass is not None]
        if not reviewed:
            raise ValueError("a judge's memory needs at least one exchange labelled pass or fail")
        if k < 1:
            raise ValueError(f"a judge's memory shows k >= 1 notes, got k={k}")
        self.reviewed, self.k = reviewed, k
        self.vectorizer = alike_vectorizer()
        self.matrix = self.vectorizer.fit_transform([i.input_text for i in reviewed])

    def nearest(self, item: JudgedItem) -> list[JudgedItem]:
        """The `k` most alike, most alike first, none from `item`'s own trace."""
        sims = cosine_similarity(self.vectorizer.transform([item.input_text]), self.matrix)[0]
        order = sorted(range(len(self.reviewed)), key=lambda j: -sims[j])
        own = trace_of(item)
        return [self.reviewed[j] for j in order if trace_of(self.reviewed[j]) != own][: self.k]

    def notes(self, item: JudgedItem) -> str:
        """The block a judge reads after the exchange: the most alike note last, nearest
        the question."""
        return "\n".join([INTRO, *(note(e) for e in reversed(self.nearest(item)))])

    def save(self, folder: str | Path) -> None:
        """Into a judge adapter's folder: an adapter trained on these notes judges with
        them, so the two travel (and are registered) as one."""
        rows = [
            {
                "id": i.id,
                "request": i.input_text,
                "reply": i.output_text,
                "passed": i.human_pass,
                "comment": i.human_comment,
            }
            for i in self.reviewed
        ]
        (Path(folder) / FILE).write_text(json.dumps({"k": self.k, "reviewed": rows}, indent=1))

    @classmethod
    def beside(cls, adapter: str | Path | None) -> ReviewedMemory | None:
        """The memory saved in a judge adapter's folder; None when it has none."""
        path = Path(adapter) / FILE if adapter else None
        if path is None or not path.is_file():
            return None
        try:
            saved = json.loads(path.read_text())
            k, rows = saved["k"], saved["reviewed"]
        except (ValueError, KeyError, TypeError) as err:
            raise ValueError(f"{path}: not a judge's memory ({err!r})") from err
        items = []
        for n, row in enumerate(rows):
            try:
                items.append(
                    JudgedItem(
                        row["id"], row["request"], row["reply"], row["passed"], row["comment"]
                    )
                )
            except (KeyError, TypeError) as err:
                raise ValueError(f"{path}: reviewed[{n}] has no field {err}") from err
        return cls(items, k)
