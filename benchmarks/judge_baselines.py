"""What judges with no language model agree at on the demo's labels: the bars a trained
judge has to clear before its reading counts for anything.

- **naming a kind**: pass every reply that names one of the router's kinds, right or wrong
  (the reply alone, without the request);
- **resemblance to reviewed replies**: pass a reply that is more like the replies people
  passed than the ones they failed, among the labelled exchanges whose requests are most
  alike (the judge's memory, `judges.memory`, compared word for word instead of read),
  with the adapter's split of the labels or with all of them as its memory;
- **a perfect reader of the notes**: the kind most of the nearest notes say was right
  against the kind the reply names first (a ceiling, not a judge: it parses the comments).
"""

from __future__ import annotations

from collections import Counter

from sklearn.metrics.pairwise import cosine_similarity

from infra.agents.intent_router import parse_intent
from judges.calibration import calibrate_threshold
from judges.memory import ReviewedMemory, alike_vectorizer
from judges.metrics import cohen_kappa
from judges.types import JudgedItem


def labels(items: list[JudgedItem]) -> list[bool]:
    """The people's verdicts, pass as True."""
    return [bool(i.human_pass) for i in items]


def naming_baseline(heldout: list[JudgedItem]) -> float:
    """Held-out kappa of a rule that passes every reply naming any of the router's kinds,
    right or wrong: what reading the reply alone, without the request, agrees at."""
    named = [parse_intent(item.output_text) is not None for item in heldout]
    return cohen_kappa(named, labels(heldout))


def resemblance(memory: ReviewedMemory, items: list[JudgedItem]) -> list[float]:
    """Per item: its reply's TF-IDF cosine to the most alike passing reply among its
    memory's nearest notes, minus that to the most alike failing one (0 for a side the
    notes lack)."""
    notes = [memory.nearest(item) for item in items]
    replies = {n.output_text for near in notes for n in near} | {i.output_text for i in items}
    vectorizer = alike_vectorizer().fit(sorted(replies))
    scores = []
    for item, near in zip(items, notes, strict=True):
        sims = cosine_similarity(
            vectorizer.transform([item.output_text]),
            vectorizer.transform([n.output_text for n in near]),
        )[0]
        passed = [s for s, n in zip(sims, near, strict=True) if n.human_pass]
        failed = [s for s, n in zip(sims, near, strict=True) if not n.human_pass]
        scores.append(max(passed, default=0.0) - max(failed, default=0.0))
    return scores


def resemblance_baseline(
    train: list[JudgedItem], val: list[JudgedItem], heldout: list[JudgedItem], k: int
) -> float:
    """Held-out kappa of `resemblance` with the LoRA judge's information: notes from the
    training labels, the cut calibrated on training and validation labels together."""
    return _resemblance_kappa(train, train + val, heldout, k)


def remembered_baseline(known: list[JudgedItem], heldout: list[JudgedItem], k: int) -> float:
    """Held-out kappa of `resemblance` with every known label as its memory and its cut
    calibrated on those same labels. No exchange is shown its own trace's note, so each
    known label is read as one held out: unlike the adapter, it spends no labels on a
    validation split."""
    return _resemblance_kappa(known, known, heldout, k)


def _resemblance_kappa(
    remembered: list[JudgedItem], fitted: list[JudgedItem], heldout: list[JudgedItem], k: int
) -> float:
    """Held-out kappa of `resemblance` with `remembered` as its memory, cut on `fitted`."""
    memory = ReviewedMemory(remembered, k)
    cut = calibrate_threshold(resemblance(memory, fitted), labels(fitted))
    return cohen_kappa([s >= cut for s in resemblance(memory, heldout)], labels(heldout))


def notes_ceiling(memory: ReviewedMemory, heldout: list[JudgedItem]) -> float:
    """Held-out kappa of a perfect reader of the notes: the kind most of them say was right
    ("correct: weather", "expected playlist"), compared with the kind the reply names first.
    What a judge reading this memory could reach, were reading the only difficulty."""

    def right_kind(note: JudgedItem) -> str | None:
        if note.human_pass:  # the reply named it
            return parse_intent(note.output_text)
        return parse_intent(note.human_comment.split("expected", 1)[-1])

    verdicts = []
    for item in heldout:
        kinds = Counter(k for k in map(right_kind, memory.nearest(item)) if k is not None)
        voted = kinds.most_common(1)[0][0] if kinds else None
        verdicts.append(voted is not None and parse_intent(item.output_text) == voted)
    return cohen_kappa(verdicts, labels(heldout))
