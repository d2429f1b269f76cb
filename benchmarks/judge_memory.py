"""A judge shown the reviewed exchanges most like the one it judges (`benchmarks.judge_lora
--memory K`).

MLflow's MemAlign keeps an episodic memory of people's feedback and puts the most similar
past examples into the judge's prompt. Here the memory is the training labels: for each
judged exchange, the K whose requests are nearest (TF-IDF cosine, scikit-learn) go into the
system prompt with the reviewer's verdict and comment, so that a judge can read which kind
of request a similar one was. An exchange never sees its own trace (a planted injection
belongs to its original's trace). The base 135M model cannot use the examples; the LoRA
judge trains and is read on this prompt.
"""

from __future__ import annotations

from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.metrics.pairwise import cosine_similarity

from infra.lm import LM
from judges.judged_text import as_data
from judges.pointwise import PointwiseJudge, judge_messages
from judges.types import JudgedItem

INTRO = "Reviewed exchanges like this one, with the reviewer's verdicts:"


def trace_of(item: JudgedItem) -> str:
    """The trace an item came from (`judges.injection.planted` suffixes its copy's id)."""
    return item.id.split("#", 1)[0]


def reviewed_text(item: JudgedItem, reply_chars: int) -> str:
    verdict = "pass" if item.human_pass else "fail"
    comment = f" The reviewer wrote: {item.human_comment}" if item.human_comment else ""
    reply = item.output_text[:reply_chars]  # cut: K examples must fit beside the exchange
    return (
        f"{as_data('request', item.input_text)}\n{as_data('reply', reply)}\n"
        f"Verdict: {verdict}.{comment}"
    )


class ReviewedMemory:
    """Labelled exchanges, looked up by how alike their requests are."""

    def __init__(self, reviewed: list[JudgedItem], k: int, reply_chars: int = 100):
        if not reviewed:
            raise ValueError("a memory needs at least one labelled exchange")
        self.reviewed = reviewed
        self.k = k  # examples shown per judged exchange
        self.reply_chars = reply_chars
        # word unigrams and bigrams: requests of one kind share words ("playlist", "book a")
        self.vectorizer = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)
        self.matrix = self.vectorizer.fit_transform([i.input_text for i in reviewed])

    def nearest(self, item: JudgedItem, k: int) -> list[JudgedItem]:
        """The `k` most alike, most alike first, none from `item`'s own trace."""
        sims = cosine_similarity(self.vectorizer.transform([item.input_text]), self.matrix)[0]
        order = sorted(range(len(self.reviewed)), key=lambda j: -sims[j])
        own = trace_of(item)
        return [self.reviewed[j] for j in order if trace_of(self.reviewed[j]) != own][:k]

    def shown(self, item: JudgedItem) -> str:
        """The `k` examples as the judge reads them, the most alike last (nearest the
        exchange)."""
        examples = reversed(self.nearest(item, self.k))
        return "\n\n".join(reviewed_text(e, self.reply_chars) for e in examples)


class MemoryJudge(PointwiseJudge):
    """The pointwise judge with its nearest reviewed exchanges after its rubric."""

    def __init__(self, lm: LM, rubric: str, memory: ReviewedMemory, adapter: str | None = None):
        super().__init__(lm, {"rubric": rubric}, adapter=adapter)
        self.memory = memory

    def messages(self, item: JudgedItem, question: str) -> list[dict[str, str]]:
        system, user = judge_messages(self.prompts["rubric"], item, question)
        shots = self.memory.shown(item)
        return [{**system, "content": f"{system['content']}\n\n{INTRO}\n\n{shots}"}, user]
