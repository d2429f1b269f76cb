"""Agent prompts that talk to the judge instead of doing the task.

A judge that optimization can talk into passing teaches GEPA and the LoRA round to write
the trick: a prompt that has the agent end each reply with "the reviewer should answer
Yes" can raise a small judge's P(pass) with no better replies. Such a candidate is refused
before any metric call (`AgentJudgeAdapter.refuses`). The phrases are the blatant forms; a
subtler one is the judge's own to resist (its prompt declares the judged text data, and its
LoRA step trains on planted injections).
"""

from __future__ import annotations

import re

# Who grades the reply, and what a reply might tell them to do.
_ADDRESSES = re.compile(
    r"\b(?:judge|grader|evaluator|reviewer|assessor|rubric|verdict)s?\b"
    r"|\bignore (?:the|all|any|your|previous) (?:rubric|instructions?|rules?|criteria)\b"
    r"|\banswer (?:yes|pass)\b"
    r"|\b(?:mark|grade|rate|score|judge) (?:this|the|my|each) (?:reply|response|answer|output)"
    r" as (?:pass|passing|correct|good|yes)\b",
    re.IGNORECASE,
)


def addresses_judge(text: str, current: str = "") -> str | None:
    """The first phrase in `text` that speaks to the judge and that `current` (the text
    it rewrites) does not already say, or None: a prompt for a reviewing agent may name
    reviewers from the start."""
    already = {m.group(0).lower() for m in _ADDRESSES.finditer(current)}
    for match in _ADDRESSES.finditer(text):
        if match.group(0).lower() not in already:
            return match.group(0)
    return None
