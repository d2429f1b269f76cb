"""Pulling the proposed text out of the reflection LM's reply."""

from __future__ import annotations

import re

FENCE = "```"
_LANGUAGE_TAG = re.compile(r"[\w+#.-]+[ \t]*\n")


def extract_proposal(reply: str | None) -> str:
    """The text inside the ``` block the meta-prompt asks for; "" means no proposal.

    Takes everything from the first fence to the last, so an instruction that itself
    shows a fenced example survives whole. Tolerates what LMs actually send: a language
    tag after the opening fence, a fence never closed (reply cut off), a lone closing
    fence, or no fence at all (the whole reply is the proposal).
    """
    if not reply:
        return ""
    first, last = reply.find(FENCE), reply.rfind(FENCE)
    if first == -1:
        return reply.strip()
    if first == last:
        after = reply[first + len(FENCE) :]
        if after.strip():
            return _drop_language_tag(after).strip()
        return reply[:first].strip()
    return _drop_language_tag(reply[first + len(FENCE) : last]).strip()


def _drop_language_tag(text: str) -> str:
    """Drop a lone word ending the fence's line (a language tag such as "markdown").

    Needs the newline, so a one-line block like ```Be brief.``` keeps its text.
    """
    match = _LANGUAGE_TAG.match(text)
    return text[match.end() :] if match else text
