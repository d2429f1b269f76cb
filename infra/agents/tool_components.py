"""Tool descriptions as components: what GEPA may rewrite besides the prompts.

A model picks a tool, and its arguments, from the tool's description as much as from
its instructions, so each tool a managed prompt's generations were offered is a
component of its own, named `<prompt>.tools.<tool>`, whose text is the description. Its
production text is the prompt's Langfuse config (`config["tool_descriptions"]`, tool ->
text) where the team keeps it there, else the description the traces recorded. A
winner goes back the same way: into the prompt's config, beside the prompt's new text
(`flows.production.promotion`), and its MLflow prompt version is registered with the
others. The tool's name and parameters never change: a call must still reach the tool.
"""

from __future__ import annotations

from collections.abc import Mapping

from infra.lm.tools import Tool, tool_name
from infra.traces.managed_prompts import ManagedPrompt

SEPARATOR = ".tools."
CONFIG_KEY = "tool_descriptions"  # a Langfuse prompt's config: tool name -> description


def component_name(prompt: str, tool: str) -> str:
    return f"{prompt}{SEPARATOR}{tool}"


def tool_of(component: str) -> tuple[str, str] | None:
    """(prompt, tool) of a tool description component; None for a prompt."""
    prompt, found, tool = component.rpartition(SEPARATOR)
    return (prompt, tool) if found and prompt and tool else None


def seed_descriptions(prompt: ManagedPrompt, tools: list[Tool]) -> dict[str, str]:
    """Each tool's description component for a prompt's generations: the prompt's config
    where it names one, else the recorded definition's."""
    kept = prompt.config.get(CONFIG_KEY)
    kept = kept if isinstance(kept, dict) else {}
    found = {}
    for tool in tools:
        name = tool_name(tool)
        recorded = (tool.get("function") or {}).get("description", "")
        found[component_name(prompt.name, name)] = str(kept.get(name, recorded))
    return found


def described(tools: list[Tool], prompt: str, candidate: Mapping[str, str]) -> list[Tool]:
    """The tools with the candidate's descriptions (the recorded ones where it has none)."""
    out = []
    for tool in tools:
        text = candidate.get(component_name(prompt, tool_name(tool)))
        if text is None or "function" not in tool:
            out.append(tool)
            continue
        out.append({**tool, "function": {**tool["function"], "description": text}})
    return out
