"""A production trace, a score on it and a corrected output, as flywheel sees them.

All are mapped from Langfuse's own shapes in `infra.traces.mapping` only; everything
downstream reads these types and never a Langfuse dict.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from infra.scales import Kind

ScoreDataType = Literal["BOOLEAN", "NUMERIC", "CATEGORICAL"]
ScoreSource = Literal["ANNOTATION", "API", "EVAL"]
# Langfuse's score data types and the scale kinds they are, both ways
KIND_OF: dict[ScoreDataType, Kind] = {
    "BOOLEAN": "boolean",
    "CATEGORICAL": "categorical",
    "NUMERIC": "numeric",
}
GENERATION, TOOL = "GENERATION", "TOOL"
# Where an agent records the variables it compiled a managed prompt with: Langfuse keeps
# the prompt's name and version on a generation, not the values that filled it.
PROMPT_VARIABLES = "prompt_variables"
DATA_TYPE_OF: dict[Kind, ScoreDataType] = {kind: data_type for data_type, kind in KIND_OF.items()}


@dataclass(frozen=True)
class TraceRecord:
    """One observation inside a trace: an LLM call (a Langfuse GENERATION) or a tool call
    (TOOL), whose recorded output later steps may have read.

    `input` and `output` are kept exactly as Langfuse gave them: a chat message list, a
    dict, or a string (the v2 observations API returns JSON as raw strings). Read them
    through `messages`, `user_text` and `output_text`, which accept every form.
    `steps`: when a trace holds several observations, its last generation carries them
    all, in recorded order, itself last (`flows.night.collect` groups them).
    """

    id: str
    trace_id: str
    start_time: datetime
    name: str | None = None
    input: Any = field(default=None, hash=False)
    output: Any = field(default=None, hash=False)
    prompt_name: str | None = None
    prompt_version: int | None = None
    tags: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict, hash=False)
    environment: str | None = None  # Langfuse's environment of the trace ("default" if unset)
    type: str = GENERATION  # Langfuse's observation type: GENERATION, TOOL, SPAN, ...
    parent_id: str | None = None  # the observation this one ran inside
    model: str | None = None  # the model a generation called
    model_parameters: dict[str, Any] = field(default_factory=dict, hash=False)
    steps: tuple[TraceRecord, ...] = field(default=(), hash=False, compare=False)
    session_id: str | None = None  # the Langfuse session (a conversation) the trace is in
    # the session's earlier traces, oldest first, as (request, reply): the conversation
    # before this turn, as far as it was read (`infra.traces.sessions`)
    conversation: tuple[tuple[str, str], ...] = field(default=(), hash=False, compare=False)

    @property
    def prompt_variables(self) -> dict[str, str] | None:
        """The variables the managed prompt was compiled with, where the agent recorded
        them (`metadata["prompt_variables"]`, see docs/production.md); None otherwise."""
        found = self.metadata.get(PROMPT_VARIABLES)
        if not isinstance(found, dict):
            return None
        return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in found.items()}

    @property
    def served_prompts(self) -> dict[str, int]:
        """Langfuse prompt name -> version, of each managed prompt this trace's generations
        were compiled from (itself and its steps): which label's version served it, where
        traffic is split between `production` and a `canary`."""
        return {
            record.prompt_name: record.prompt_version
            for record in (*self.steps, self)
            if record.prompt_name and record.prompt_version is not None
        }

    @property
    def messages(self) -> list[dict[str, str]]:
        """The input as a chat: `[{"role", "content"}, ...]`; plain text is one user turn."""
        return _as_messages(_decoded(self.input))

    @property
    def user_text(self) -> str:
        """The last user turn's text, the task instance an agent answered."""
        users = [m["content"] for m in self.messages if m["role"] == "user"]
        return users[-1] if users else ""

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The tool definitions a generation was offered (OpenAI's shape: Langfuse's
        OpenAI integration records them beside the messages in its input)."""
        found = _decoded(self.input)
        tools = found.get("tools") if isinstance(found, dict) else None
        return [t for t in tools if isinstance(t, dict)] if isinstance(tools, list) else []

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        """The tool calls a generation's reply asked for (OpenAI's shape), if any."""
        found = _decoded(self.output)
        if isinstance(found, list) and found and isinstance(found[-1], dict):
            found = found[-1]
        calls = found.get("tool_calls") if isinstance(found, dict) else None
        return [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []

    @property
    def turns(self) -> list[dict[str, Any]]:
        """The input as a chat, as `messages`, with each turn's tool calls and tool call
        id kept: what a tool-calling agent sent."""
        found = _decoded(self.input)
        if isinstance(found, dict) and isinstance(found.get("messages"), list):
            found = found["messages"]
        raw = [m for m in found if isinstance(m, dict)] if isinstance(found, list) else []
        kept = self.messages
        if len(raw) != len(kept):
            return kept
        return [
            {**turn, **{k: m[k] for k in ("tool_calls", "tool_call_id") if m.get(k)}}
            for turn, m in zip(kept, raw, strict=True)
        ]

    @property
    def output_text(self) -> str:
        """The model's reply as text, whichever shape the output was logged in."""
        reply = _as_messages(_decoded(self.output), default_role="assistant")
        return reply[-1]["content"] if reply else ""


@dataclass(frozen=True)
class Annotation:
    """A score on a trace (or one observation of it), or on a whole session (a
    conversation); `source == "ANNOTATION"` is a human's. A session's score is read as a
    score on the session's last trace then, whose judge reads the conversation before it
    (`infra.traces.sessions`); until then its `trace_id` is empty.

    `value` is a float for BOOLEAN (1.0 / 0.0) and NUMERIC scores, and the category label
    for CATEGORICAL ones.
    """

    id: str
    trace_id: str
    name: str
    value: float | str
    data_type: ScoreDataType
    source: ScoreSource
    timestamp: datetime
    observation_id: str | None = None
    comment: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict, hash=False)
    # Langfuse's updatedAt: an edit in its UI moves it and keeps `timestamp`
    updated_at: datetime | None = None
    session_id: str | None = None  # the session it scores, if it scores one

    @property
    def is_human(self) -> bool:
        return self.source == "ANNOTATION"

    @property
    def kind(self) -> Kind:
        """The kind of scale the score is on: "boolean", "categorical" or "numeric"."""
        return KIND_OF[self.data_type]


def _decoded(value: Any) -> Any:
    """Parse a JSON-encoded list or object; any other string stays text."""
    if isinstance(value, str) and value.lstrip()[:1] in ("[", "{"):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _as_messages(value: Any, default_role: str = "user") -> list[dict[str, str]]:
    if value is None:
        return []
    if isinstance(value, str):
        return [{"role": default_role, "content": value}]
    if isinstance(value, dict):
        if isinstance(value.get("messages"), list):  # e.g. chat-completions kwargs
            return _as_messages(value["messages"], default_role)
        if "content" in value:  # a single message
            return [_message(value, default_role)]
        texts = [v for v in value.values() if isinstance(v, str)]
        text = texts[0] if len(texts) == 1 else json.dumps(value, sort_keys=True)
        return [{"role": default_role, "content": text}]
    if isinstance(value, list):
        return [_message(m, default_role) for m in value if isinstance(m, dict)]
    return [{"role": default_role, "content": json.dumps(value)}]


def _message(message: dict[str, Any], default_role: str) -> dict[str, str]:
    return {
        "role": str(message.get("role", default_role)),
        "content": _text(message.get("content")),
    }


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts: keep the text ones
        parts = [p.get("text", "") for p in content if isinstance(p, dict)]
        return "".join(p for p in parts if isinstance(p, str))
    return json.dumps(content)


@dataclass(frozen=True)
class Correction:
    """What a person says the model should have answered on a trace (Langfuse's corrected
    output: a score of dataType CORRECTION whose value is the text)."""

    id: str
    trace_id: str
    text: str
    timestamp: datetime
    observation_id: str | None = None
