"""A Langfuse-managed prompt, and how a candidate text of it is rendered for one call.

The component flywheel optimizes is a text prompt's whole text, or a chat prompt's system
message (its other messages stay as they are, `{{variables}}` and all). Rendering uses
Langfuse's own template compiler, so a replayed call sees exactly what `prompt.compile`
gave in production. A JSONL export may carry its prompts in `prompts.jsonl`, one per line
in Langfuse's public prompts API shape.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langfuse.model import TemplateParser

from infra.traces.errors import RecordError
from infra.traces.source import TraceSourceError

PRODUCTION = "production"
Message = dict[str, str]


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
        texts = [self.text] if self.messages is None else [m["content"] for m in self.messages]
        names = [n for t in texts for n in TemplateParser.find_variable_names(t)]
        return list(dict.fromkeys(names))

    def render(self, text: str, variables: dict[str, str]) -> list[Message]:
        """The chat sent for one call, with `text` as the component: a text prompt is one
        user turn. A variable the prompt used but `text` dropped is appended as a
        `name: value` line, so a rewritten prompt never loses the task's inputs."""
        if self.messages is None:
            chat = [{"role": "user", "content": text}]
        else:
            chat = self.with_component(text)
        kept = {n for m in chat for n in _names(m["content"])}
        lost = [n for n in self.variables() if n not in kept]
        return [
            {
                "role": m["role"],
                "content": _compiled(m["content"], variables, lost if m is chat[0] else []),
            }
            for m in chat
        ]

    def with_component(self, text: str) -> list[Message]:
        """The chat with `text` as its system message (added first if it had none)."""
        assert self.messages is not None
        chat = [
            {"role": str(m["role"]), "content": str(m.get("content", ""))} for m in self.messages
        ]
        if not any(m["role"] == "system" for m in chat):
            return [{"role": "system", "content": text}, *chat]
        return [{**m, "content": text} if m["role"] == "system" else m for m in chat]


def infer_variables(prompt: ManagedPrompt, sent: list[Message]) -> dict[str, str] | None:
    """The variables that rendered `prompt` (its production text) into the chat `sent`,
    read back by matching the template against it; None where it does not match (the
    trace used another text than this version's). For agents that did not record them."""
    if prompt.messages is None:
        expected = [{"role": "user", "content": prompt.text}]
    else:
        expected = prompt.with_component(prompt.text)
    if len(expected) != len(sent):
        return None
    found: dict[str, str] = {}
    for want, got in zip(expected, sent, strict=True):
        if want["role"] != got.get("role"):
            return None
        match = _template_regex(want["content"]).fullmatch(got.get("content", ""))
        if match is None:
            return None
        groups = _named_groups(want["content"], match)
        if groups is None or any(found.setdefault(n, v) != v for n, v in groups.items()):
            return None
    return found


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
            isinstance(m, dict) and isinstance(m.get("content"), str) for m in body
        ):
            raise RecordError("prompt", "a chat prompt is a list of {role, content} messages")
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
