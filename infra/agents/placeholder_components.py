"""A chat prompt's fixed message placeholder as a component: few-shot turns GEPA may rewrite.

A Langfuse chat prompt's placeholder is filled by the agent when it compiles the prompt.
Where every recorded call filled it with the same messages (few-shot turns, a fixed
preamble) those messages are part of the prompt in all but name, and a component of
their own, `<prompt>.placeholders.<name>`. Its production text is the prompt's Langfuse
config (`config["placeholders"]`, name -> messages) where the team keeps it there, else
the recorded fill. A placeholder filled differently per call (a conversation's history)
is the call's data: replayed as recorded, never a component.

The component's text is the messages as a transcript, one `role: content` block each,
which a reflection reads and rewrites as it would a prompt; a text with no role line is
one user message. A winner goes back into the prompt's config, beside its new text
(`flows.production.promotion`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from infra.traces.managed_prompts import ManagedPrompt, Message

SEPARATOR = ".placeholders."
CONFIG_KEY = "placeholders"  # a Langfuse prompt's config: placeholder -> its messages
ROLE_LINE = re.compile(r"^(system|user|assistant): ?", re.MULTILINE)


def component_name(prompt: str, placeholder: str) -> str:
    return f"{prompt}{SEPARATOR}{placeholder}"


def placeholder_of(component: str) -> tuple[str, str] | None:
    """(prompt, placeholder) of a placeholder component; None for any other."""
    prompt, found, name = component.rpartition(SEPARATOR)
    return (prompt, name) if found and prompt and name else None


def as_text(messages: Sequence[Message]) -> str:
    return "\n\n".join(f"{m['role']}: {m['content']}" for m in messages)


def as_messages(text: str) -> list[Message]:
    """A transcript back as messages: each `role:` line starts one."""
    starts = list(ROLE_LINE.finditer(text))
    if not starts:
        return [{"role": "user", "content": text.strip()}] if text.strip() else []
    ends = [m.start() for m in starts[1:]] + [len(text)]
    return [
        {"role": m.group(1), "content": text[m.end() : end].strip()}
        for m, end in zip(starts, ends, strict=True)
    ]


def seed_placeholders(
    prompt: ManagedPrompt, fixed: Mapping[str, Sequence[Message]]
) -> dict[str, str]:
    """Each fixed placeholder's component: the prompt's config where it names one, else
    the recorded fill."""
    kept = prompt.config.get(CONFIG_KEY)
    kept = kept if isinstance(kept, dict) else {}
    found = {}
    for name, messages in fixed.items():
        configured = kept.get(name)
        if isinstance(configured, list) and all(isinstance(m, dict) for m in configured):
            messages = configured
        found[component_name(prompt.name, name)] = as_text(messages)
    return found


def filled(prompt: str, candidate: Mapping[str, str]) -> dict[str, list[Message]]:
    """The candidate's fill of each of `prompt`'s fixed placeholders."""
    return {
        found[1]: as_messages(text)
        for component, text in candidate.items()
        if (found := placeholder_of(component)) and found[0] == prompt
    }
