"""The judge's slow loop, as data: people's labels become LoRA training records on the
judge's own prompt, so that a small model's verdict tokens learn what people decide.

Records use trl's prompt-completion format (as `weights.datasets` does): the judge's chat
is the prompt, the verdict token it should give is the completion, so the loss falls on
the completion alone. Pointwise records are balanced by label (the minority repeated in a
seeded order): a judge trained on 70% failures learns to say "No". Pairwise records hold
every pair in both orders with the preferred letter swapped with it, so the position an
answer is shown in carries no signal. With `comments`, a pointwise completion goes on
after its verdict with the annotator's comment ("No. expected playlist; the reply said
weather"): the verdict token is still what the judge is read on, and the reason teaches
a small model what the label alone does not (here, which intent was right). Planted
injections (a failing reply that tells the judge to pass it) are extra failing records,
so the adapter learns that an instruction inside the judged text is part of what it
judges.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from judges.injection import TRAINING, planted
from judges.mismatched import mismatched
from judges.pairwise import ASK_PROBABILITY, LABELS, PairwiseJudge
from judges.pointwise import CHOICES, PASS_QUESTION, judge_messages
from judges.types import JudgedItem, PairwiseItem

Record = dict[str, list[dict[str, str]]]


def pointwise_records(
    rubric: str,
    items: Sequence[JudgedItem],
    seed: int = 0,
    injections: bool = False,
    comments: bool = False,
    messages: Callable[[JudgedItem], list[dict[str, str]]] | None = None,
    mismatched_replies: bool = False,
) -> list[Record]:
    """One record per labelled item, its verdict as the completion (then the annotator's
    comment, with `comments`), both labels equally many; with `injections`, each failing
    item once more with an instruction to the judge appended to its reply, still labelled
    fail; with `mismatched_replies`, each passing reply once more under an unlike request,
    labelled fail (`judges.mismatched`). `messages`: the judge's chat for an item, when it
    is not the plain pointwise one on `rubric` (a judge whose prompt holds more than the
    rubric)."""
    labelled = [i for i in items if i.human_pass is not None]
    rng = random.Random(seed)
    passing = [i for i in labelled if i.human_pass]
    failing = [i for i in labelled if not i.human_pass]
    if injections:
        failing += [planted(item, TRAINING, rng) for item in failing]
    if mismatched_replies:
        failing += mismatched(passing, rng)
    chat = messages or (lambda item: judge_messages(rubric, item, PASS_QUESTION))
    records = [_verdict(chat(i), i, comments) for i in _balanced(passing, failing, rng)]
    rng.shuffle(records)
    return records


def pairwise_records(judge: PairwiseJudge, items: Sequence[PairwiseItem]) -> list[Record]:
    """Each pair with a human preference in both orders, the shown letter of the preferred
    answer following it, so that "A" and "B" are right equally often."""
    records = []
    for item in items:
        if item.human_prefers is None:
            continue
        for swapped in (False, True):
            first_is_preferred = (item.human_prefers == "A") != swapped
            letter = LABELS[0] if first_is_preferred else LABELS[1]
            records.append(
                {
                    "prompt": judge.messages(item, swapped, ASK_PROBABILITY),
                    "completion": [{"role": "assistant", "content": letter}],
                }
            )
    return records


def _verdict(prompt: list[dict[str, str]], item: JudgedItem, comments: bool) -> Record:
    answer = CHOICES[0] if item.human_pass else CHOICES[1]
    if comments and item.human_comment.strip():
        answer = f"{answer}. {item.human_comment.strip()}"
    return {
        "prompt": prompt,
        "completion": [{"role": "assistant", "content": answer}],
    }


def _balanced(
    passing: list[JudgedItem], failing: list[JudgedItem], rng: random.Random
) -> list[JudgedItem]:
    """Both classes at the larger one's size, the smaller repeated whole, then topped up
    with a seeded sample; a class with no items stays empty (nothing to repeat)."""
    size = max(len(passing), len(failing))
    out: list[JudgedItem] = []
    for group in (passing, failing):
        if group:
            whole, rest = divmod(size, len(group))
            out += group * whole + rng.sample(group, rest)
    return out
