"""Proposals that are not candidates: texts worth no metric call.

A small reflection model sometimes answers the meta-prompt instead of rewriting the
component: "What is the task ...? Provide a detailed task description with 2-3 different
reflection points" replaced a judge's rubric in a real night, and on a noisy metric such
a text can even win. It is recognized by its words: most of what it says comes from the
meta-prompt's own instructions and not from the text it was asked to rewrite. The task's
evidence (inputs, outputs, feedback) is not counted against it, so a rewrite that names
what the examples taught is never refused for that.

The adapter may refuse texts for reasons of its own (`Adapter.refuses`): an agent prompt
that addresses the judge scoring it, say.
"""

from __future__ import annotations

import re

from gepa_opt.config import GEPAConfig
from gepa_opt.meta_prompt import CURRENT_INSTRUCTIONS, EXAMPLES
from gepa_opt.types import Adapter

# Words too common to tell a restatement from a rewrite.
_COMMON = frozenset(
    "about all also and any are but can could each for from has have how into its may "
    "more not one only or other our out some such than that the their them then there "
    "these they this those was were what when which while who why will with would you "
    "your".split()
)
MIN_WORDS = 3  # a restatement says at least this many of the meta-prompt's own words
MIN_SHARE = 0.5  # and they are at least this share of what it says


def refused(
    component: str,
    text: str,
    current: str,
    config: GEPAConfig,
    adapter: Adapter,
    demonstrations: str | None,
) -> bool:
    """Whether a proposed text is no candidate. Demonstrations (the component named
    `demonstrations`) come from their pool, not from the meta-prompt: only the adapter
    may refuse them."""
    template = config.template_for(component)
    restates = component != demonstrations and restates_meta_prompt(text, template, current)
    if config.refuse_meta_restatements and restates:
        return True
    refuses = getattr(adapter, "refuses", None)
    return refuses is not None and refuses(component, text, current) is not None


def restates_meta_prompt(text: str, template: str, current: str) -> bool:
    """Whether `text` is mostly the meta-prompt's own words (`template`, its placeholders
    left out) that the component's `current` text does not use."""
    said = _words(text)
    meta = _words(template.replace(CURRENT_INSTRUCTIONS, " ").replace(EXAMPLES, " "))
    borrowed = (said & meta) - _words(current)
    return len(borrowed) >= MIN_WORDS and len(borrowed) >= MIN_SHARE * len(said)


def _words(text: str) -> set[str]:
    found = re.findall(r"[a-z][a-z0-9'-]{2,}", text.lower())
    return {word for word in found if word not in _COMMON}
