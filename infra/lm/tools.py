"""Tools in the model seam: OpenAI-style tool definitions in, tool calls out.

A caller passes `tools` as the OpenAI chat API takes them (`{"type": "function",
"function": {"name", "description", "parameters"}}`) and gets `Completion.tool_calls`.
A chat may hold the turns a tool-calling agent makes: an assistant turn with
`tool_calls` (OpenAI's shape, arguments as a JSON string) and a `tool` turn with the
result and its `tool_call_id`.

An OpenAI-compatible server does all of this itself. A local model does it through its
chat template: where the template reads `tools` (Qwen2.5's does) the tools and the
turns go in as transformers expects; where it does not (SmolLM2's), the tools are
described in the system turn and earlier calls written out as text, in the same
`<tool_call>{"name": ..., "arguments": ...}</tool_call>` form that Qwen2.5 (and the
Hermes format it follows) writes. The reply is read back from that form either way.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

Tool = dict[str, Any]  # {"type": "function", "function": {"name", "description", "parameters"}}

_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)


@dataclass(frozen=True)
class ToolCall:
    """One function call a model asked for."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict, hash=False)
    id: str = ""

    def key(self) -> tuple[str, str]:
        """Name and arguments, normalized (keys sorted, no whitespace): two calls with the
        same key ask for the same thing, so a recorded result answers both."""
        return self.name, json.dumps(self.arguments, sort_keys=True, separators=(",", ":"))

    def written(self) -> str:
        """The call as a model writes it: <tool_call>{"name": .., "arguments": ..}</tool_call>."""
        body = json.dumps({"name": self.name, "arguments": self.arguments})
        return f"<tool_call>{body}</tool_call>"

    def openai(self, index: int = 0) -> dict[str, Any]:
        """The call as an assistant turn's `tool_calls` entry in OpenAI's shape."""
        return {
            "id": self.id or f"call_{index}",
            "type": "function",
            "function": {"name": self.name, "arguments": json.dumps(self.arguments)},
        }


def tool_name(tool: Tool) -> str:
    return (tool.get("function") or tool).get("name", "")


def check_tools(tools: list[Tool]) -> None:
    """Raise ValueError naming the tool and field a definition lacks."""
    for index, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise ValueError(f"tools[{index}]: needs function.name (OpenAI's tool shape)")
        if not isinstance(function.get("parameters", {}), dict):
            name = function["name"]
            raise ValueError(f"tools[{index}] {name}: function.parameters is not an object")


def call_from(data: Any) -> ToolCall | None:
    """A tool call from a parsed JSON object ({"name", "arguments"} or OpenAI's
    {"function": {...}, "id"}); None where it is not one."""
    if not isinstance(data, dict):
        return None
    function = data.get("function") if isinstance(data.get("function"), dict) else data
    name = function.get("name")
    arguments = function.get("arguments", function.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError:
            return None
    if not isinstance(name, str) or not name or not isinstance(arguments, dict):
        return None
    return ToolCall(name, arguments, str(data.get("id") or ""))


def parse_tool_calls(text: str) -> tuple[str, list[ToolCall]]:
    """The reply's own text and the calls it wrote as `<tool_call>{...}</tool_call>`.
    A block that is not a call (broken JSON, no name) stays in the text: the judge then
    sees what the model wrote."""
    calls: list[ToolCall] = []
    kept: list[str] = []
    last = 0
    for match in _CALL.finditer(text):
        try:
            call = call_from(json.loads(match.group(1)))
        except json.JSONDecodeError:
            call = None
        if call is None:
            continue
        kept.append(text[last : match.start()])
        last = match.end()
        calls.append(call)
    kept.append(text[last:])
    return "".join(kept).strip() if calls else text, calls


def template_reads_tools(chat_template: str | None) -> bool:
    """Whether a chat template renders the `tools` it is given (it names the variable)."""
    return bool(chat_template) and re.search(r"\btools\b", chat_template) is not None


def for_template(messages: list[dict[str, Any]], native: bool) -> list[dict[str, Any]]:
    """A tool-calling chat as a chat template can render it: `native` templates get each
    call's arguments as a dict (what transformers' templates expect); the others get
    calls written out as text in the assistant's turn, and results as `tool` turns."""
    rendered = []
    for message in messages:
        calls = [c for c in map(call_from, message.get("tool_calls") or []) if c]
        if not calls:
            rendered.append({**message, "content": message.get("content") or ""})
            continue
        if native:
            entries = [
                {"type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in calls
            ]
            content = message.get("content") or ""
            rendered.append({**message, "content": content, "tool_calls": entries})
            continue
        text = "\n".join(c.written() for c in calls)
        content = f"{message.get('content') or ''}\n{text}".strip()
        rendered.append({"role": message["role"], "content": content})
    return rendered


def with_tools_described(messages: list[dict[str, Any]], tools: list[Tool]) -> list[dict[str, Any]]:
    """The chat with the tools described in its system turn, for a template that does
    not read `tools`: the definitions as JSON and how to call one."""
    listed = "\n".join(json.dumps(t, sort_keys=True) for t in tools)
    guide = (
        "You may call these tools. To call one, reply with\n"
        '<tool_call>{"name": <tool name>, "arguments": <arguments object>}</tool_call>\n'
        f"<tools>\n{listed}\n</tools>"
    )
    if messages and messages[0].get("role") == "system":
        first = messages[0]
        return [{**first, "content": f"{first['content']}\n\n{guide}"}, *messages[1:]]
    return [{"role": "system", "content": guide}, *messages]
