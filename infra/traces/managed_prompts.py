"""A Langfuse-managed prompt, and how a candidate text of it is rendered for one call.

The component flywheel optimizes is a text prompt's whole text, or a chat prompt's system
message (its other messages stay as they are, `{{variables}}` and all). Rendering uses
Langfuse's own template compiler, so a replayed call sees exactly what `prompt.compile`
gave in production. A chat prompt's message placeholders (`{"type": "placeholder",
"name": ...}`, filled with a list of messages when the agent compiles it: a conversation's
history, few-shot turns) are read back from each recorded chat (`match_chat`) and filled
again with what filled them. A JSONL export may carry its prompts in `prompts.jsonl`, one
per line in Langfuse's public prompts API shape.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langfuse.model import TemplateParser

from infra.traces.errors import RecordError
from infra.traces.source import TraceSourceError

PRODUCTION = "production"
PLACEHOLDER = "placeholder"  # a chat prompt's message that a list of messages fills
Message = dict[str, str]


def is_placeholder(message: dict[str, Any]) -> bool:
    return message.get("type") == PLACEHOLDER


@dataclass(frozen=True)
class ManagedPrompt:
    name: str
    version: int
    text: str  # the component: the text prompt, or a chat prompt's system message
    messages: list[dict[str, Any]] | None = None  # the whole chat, for a chat prompt
    config: dict[str, Any] = field(default_factory=dict)
    labels: tuple[str, ...] = ()

    def variables(self) -> list[str]:
        """The `{{variables}}` of the whole prompt, in order of first use."""
        texts = [m["content"] for m in self.template(self.text) if not is_placeholder(m)]
        names = [n for t in texts for n in TemplateParser.find_variable_names(t)]
        return list(dict.fromkeys(names))

    def placeholders(self) -> list[str]:
        """The names of its message placeholders, in order."""
        return [str(m["name"]) for m in self.messages or [] if is_placeholder(m)]

    def template(self, text: str) -> list[dict[str, Any]]:
        """The prompt with `text` as the component, placeholders unfilled: a text prompt
        is one user turn."""
        if self.messages is None:
            return [{"role": "user", "content": text}]
        return self.with_component(text)

    def render(
        self,
        text: str,
        variables: dict[str, str],
        fills: Mapping[str, Sequence[Message]] | None = None,
    ) -> list[Message]:
        """The chat sent for one call, with `text` as the component and each placeholder
        filled from `fills` (left empty where it has none). A variable the prompt used but
        `text` dropped is appended as a `name: value` line to its first message, so a
        rewritten prompt never loses the task's inputs."""
        chat = self.template(text)
        fixed = [m for m in chat if not is_placeholder(m)]
        kept = {n for m in fixed for n in _names(m["content"])}
        lost = [n for n in self.variables() if n not in kept]
        out: list[Message] = []
        for m in chat:
            if is_placeholder(m):
                out += [dict(filled) for filled in (fills or {}).get(m["name"], ())]
                continue
            appended = lost if fixed and m is fixed[0] else []
            out.append({"role": m["role"], "content": _compiled(m["content"], variables, appended)})
        return out

    def with_component(self, text: str) -> list[dict[str, Any]]:
        """The chat with `text` as its system message (added first if it had none)."""
        assert self.messages is not None
        chat = [
            dict(m)
            if is_placeholder(m)
            else {"role": str(m["role"]), "content": str(m.get("content", ""))}
            for m in self.messages
        ]
        if not any(m.get("role") == "system" for m in chat):
            return [{"role": "system", "content": text}, *chat]
        return [{**m, "content": text} if m.get("role") == "system" else m for m in chat]


@dataclass(frozen=True)
class ChatMatch:
    """How a recorded chat was rendered from a prompt: its variables, what filled each
    placeholder, and how many of the chat's first messages the prompt made."""

    variables: dict[str, str]
    fills: dict[str, list[Message]]
    used: int


def match_chat(
    prompt: ManagedPrompt,
    sent: list[Message],
    end: int | None = None,
    known: Mapping[str, Sequence[Message]] | None = None,
) -> ChatMatch | None:
    """`prompt` (its production text) matched against the start of the chat `sent`, up
    to `end` (all of it when None): each message against its template, each placeholder
    taking the messages between its neighbours: its `known` fill where the chat holds it
    there; else the last placeholder all that its fixed followers leave before `end`; one
    right before another placeholder, none (the later takes them: which is whose, only
    other calls can tell, `infra.agents.replay.fixed_placeholders`); any other, the
    fewest before its next message matches. None where the chat does not match: the
    trace used another version."""
    expected = prompt.template(prompt.text)
    end = len(sent) if end is None else end
    found: dict[str, str] = {}
    fills: dict[str, list[Message]] = {}
    at = 0
    for n, want in enumerate(expected):
        if is_placeholder(want):
            stop = _fill_end(expected[n + 1 :], sent, at, end, (known or {}).get(want["name"]))
            if stop < at:
                return None
            fills[str(want["name"])] = [dict(m) for m in sent[at:stop]]
            at = stop
            continue
        groups = _groups(want, sent[at]) if at < end else None
        if groups is None or any(found.setdefault(k, v) != v for k, v in groups.items()):
            return None
        at += 1
    return ChatMatch(found, fills, at)


def _fill_end(
    after: list[dict[str, Any]],
    sent: list[Message],
    at: int,
    end: int,
    known: Sequence[Message] | None,
) -> int:
    """Where the fill of a placeholder starting at `at` ends (`match_chat`); -1: nowhere."""
    if known is not None and sent[at : at + len(known)] == list(known):
        return at + len(known)
    if after and is_placeholder(after[0]):
        return at
    if not any(is_placeholder(m) for m in after):
        return end - len(after)
    following = after[0]
    return next((k for k in range(at, end) if _groups(following, sent[k]) is not None), -1)


def infer_variables(prompt: ManagedPrompt, sent: list[Message]) -> dict[str, str] | None:
    """The variables that rendered `prompt` (its production text) into the whole chat
    `sent`, read back by matching the template against it; None where it does not match
    (the trace used another text than this version's). For agents that did not record
    them."""
    match = match_chat(prompt, sent)
    return match.variables if match is not None and match.used == len(sent) else None


def _groups(want: dict[str, Any], got: Message) -> dict[str, str] | None:
    """Each variable's text where the message `got` is the template `want`, else None."""
    if want["role"] != got.get("role"):
        return None
    match = _template_regex(want["content"]).fullmatch(got.get("content") or "")
    return None if match is None else _named_groups(want["content"], match)


def managed_prompt_from_langfuse(record: dict[str, Any]) -> ManagedPrompt:
    """One prompt in Langfuse's public API shape (`GET /api/public/v2/prompts/{name}`)."""
    name, version, kind = record.get("name"), record.get("version"), record.get("type")
    if not isinstance(name, str) or not name:
        raise RecordError("name", f"expected a non-empty string, got {name!r}")
    if isinstance(version, bool) or not isinstance(version, int):
        raise RecordError("version", f"expected an integer, got {version!r}")
    body = record.get("prompt")
    labels = tuple(record.get("labels") or ())
    config = dict(record.get("config") or {})
    if kind == "chat":
        if not isinstance(body, list) or not all(
            isinstance(m, dict)
            and (
                isinstance(m.get("content"), str)
                or (is_placeholder(m) and isinstance(m.get("name"), str) and m["name"])
            )
            for m in body
        ):
            raise RecordError(
                "prompt",
                "a chat prompt is a list of {role, content} messages and "
                '{"type": "placeholder", "name"} placeholders',
            )
        system = [m["content"] for m in body if m.get("role") == "system"]
        return ManagedPrompt(name, version, system[0] if system else "", body, config, labels)
    if kind == "text":
        if not isinstance(body, str):
            raise RecordError("prompt", f"a text prompt is a string, got {type(body).__name__}")
        return ManagedPrompt(name, version, body, None, config, labels)
    raise RecordError("type", f"{kind!r} is not text or chat")


def read_prompt_file(path: Path) -> dict[str, ManagedPrompt]:
    """Each prompt's version labelled production in an export's `prompts.jsonl` (the
    highest version where none is labelled); a bad line stops the night, naming it: the
    prompts are what the night optimizes."""
    versions: dict[str, list[ManagedPrompt]] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            prompt = managed_prompt_from_langfuse(json.loads(line))
        except json.JSONDecodeError as err:
            raise TraceSourceError(f"{path}:{number}: not valid JSON ({err.msg})") from err
        except RecordError as err:
            raise TraceSourceError(f"{path}:{number}: field {err.field}: {err.message}") from err
        versions.setdefault(prompt.name, []).append(prompt)
    return {
        name: max(found, key=lambda p: (PRODUCTION in p.labels, p.version))
        for name, found in versions.items()
    }


def _compiled(content: str, variables: dict[str, str], appended: list[str]) -> str:
    text = TemplateParser.compile_template(content, variables)
    extra = [f"{n}: {variables[n]}" for n in appended if n in variables]
    return "\n\n".join([text, *extra]) if extra else text


def _names(content: str) -> list[str]:
    return TemplateParser.find_variable_names(content)


_VARIABLE = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)


def _template_regex(template: str) -> re.Pattern[str]:
    """The template as a pattern, each `{{variable}}` a lazy group matching any text."""
    parts, last = [], 0
    for match in _VARIABLE.finditer(template):
        parts += [re.escape(template[last : match.start()]), "(.*?)"]
        last = match.end()
    return re.compile("".join([*parts, re.escape(template[last:])]), re.DOTALL)


def _named_groups(template: str, match: re.Match[str]) -> dict[str, str] | None:
    """Each variable's text; None when one variable reads as two texts."""
    names = [m.group(1).strip() for m in _VARIABLE.finditer(template)]
    found: dict[str, str] = {}
    for name, value in zip(names, match.groups(), strict=True):
        if found.setdefault(name, value) != value:
            return None
    return found
