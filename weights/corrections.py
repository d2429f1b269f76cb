"""Corrections a teacher writes from reviewers' comments, kept only where the judge passes.

A failing label with a comment ("expected weather; the reply named none") says what was
wrong but not what the reply should have been. A model stronger than the agent (the
teacher) reads the chat the agent was sent, its reply and the comment, and writes the
reply it should have given. A teacher can misread a comment (the 1.5B named the kind the
comment names in 19 of 40 with a bare prompt: ../shared/MEASURED.md), so a written
correction becomes a training target only when the night's judge passes it as the reply
to that request; the rest are counted and dropped.

The judge is the caller's, as a callable (weights/ knows no judge): `passes(example_id,
reply)` is True, False, or None where its call failed for good.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from infra.lm import LM, Message, ModelCallFailed

TEACHER_SYSTEM = (
    "You correct the replies of an AI assistant. A reviewer read one of its replies and "
    "said what was wrong with it. Write the reply the assistant should have given: only "
    "that reply, in the form and length its instructions and earlier replies show, with "
    "no explanation."
)

# example id, reply -> whether the judge passes it (None: the judge's call failed)
PassesJudge = Callable[[str, str], Awaitable[bool | None]]


@dataclass(frozen=True)
class Commented:
    """A failing reply a reviewer commented on and did not correct."""

    example_id: str
    chat: list[Message]  # what the agent was sent, as logged (its last generation's input)
    reply: str
    comment: str


@dataclass
class WrittenCorrections:
    """What the teacher wrote, and what the judge made of it."""

    kept: dict[str, str] = field(default_factory=dict)  # example id -> corrected reply
    asked: int = 0  # commented failing replies the teacher was asked about
    refused: int = 0  # written, but the judge failed them: dropped
    failed: int = 0  # the teacher's or the judge's call failed for good
    empty: int = 0  # the teacher wrote nothing usable, or the reply it was asked to correct
    left: int = 0  # commented failing replies past `corrections.max_per_night`: not asked


def correction_prompt(item: Commented) -> list[Message]:
    """The teacher's chat: the agent's conversation as a transcript, its reply, the comment."""
    transcript = "\n".join(f"[{m['role']}] {m['content']}" for m in item.chat)
    return [
        {"role": "system", "content": TEACHER_SYSTEM},
        {
            "role": "user",
            "content": (
                f"The assistant's conversation:\n<conversation>\n{transcript}\n</conversation>\n"
                f"The assistant replied:\n<reply>\n{item.reply}\n</reply>\n"
                f"The reviewer's comment: {item.comment}\n\n"
                "Write the reply the assistant should have given, as the text alone."
            ),
        },
    ]


def unwrapped(text: str) -> str:
    """The reply alone: the teacher often answers in the `<reply>` tags its prompt showed
    the failing reply in (4 of the 8 it kept in one demo night were wrapped so)."""
    text = text.strip()
    if text.startswith("<reply>"):
        text = text.removeprefix("<reply>")
        text = text.split("</reply>", 1)[0]
    return text.strip()


async def write_corrections(
    teacher: LM,
    items: Sequence[Commented],
    passes: PassesJudge,
    max_tokens: int = 64,
    done: Callable[[int], None] | None = None,
) -> WrittenCorrections:
    """One greedy correction per commented reply, all in flight at once; kept where the
    judge passes it. A correction equal to the failing reply corrects nothing: dropped.
    `done(1)` as each reply's correction is written and judged (or given up on)."""
    out = WrittenCorrections(asked=len(items))

    async def one(item: Commented) -> None:
        try:
            await write_one(item)
        finally:
            if done is not None:
                done(1)

    async def write_one(item: Commented) -> None:
        try:
            written = await teacher.complete(
                correction_prompt(item), max_tokens=max_tokens, temperature=0.0
            )
            text = unwrapped(written.text)
            if not text or text == item.reply.strip():
                out.empty += 1
                return
            verdict = await passes(item.example_id, text)
        except ModelCallFailed:
            out.failed += 1
            return
        if verdict is None:
            out.failed += 1
        elif verdict:
            out.kept[item.example_id] = text
        else:
            out.refused += 1

    await asyncio.gather(*(one(item) for item in items))
    out.kept = dict(sorted(out.kept.items()))  # the order calls finished in is no content
    return out
