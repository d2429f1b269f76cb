"""What of a candidate goes into a managed prompt's Langfuse config when it is published.

A candidate holds each managed prompt's text and the components kept beside it: its tools'
descriptions (`tool_components`), its fixed placeholders' messages
(`placeholder_components`) and the files that fill its variables (`file_components`).
Published, the text is the prompt's new version and the others go into that version's
config, each under its key, where the agent reads them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infra.agents import file_components, placeholder_components, tool_components


def split(
    components: Mapping[str, str], variables: Mapping[str, list[str]] | None = None
) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
    """The prompts' texts, and per prompt what its config gains: tool -> description
    under `tool_descriptions`, placeholder -> messages under `placeholders`, and, for each
    prompt whose `variables` use it, variable -> a file's text under `files`."""
    texts: dict[str, str] = {}
    config: dict[str, dict[str, Any]] = {}
    for component, text in components.items():
        if (variable := file_components.variable_of(component)) is not None:
            for prompt, used in (variables or {}).items():
                if variable in used:
                    kept = config.setdefault(prompt, {}).setdefault(file_components.CONFIG_KEY, {})
                    kept[variable] = text
        elif found := tool_components.tool_of(component):
            kept = config.setdefault(found[0], {}).setdefault(tool_components.CONFIG_KEY, {})
            kept[found[1]] = text
        elif found := placeholder_components.placeholder_of(component):
            kept = config.setdefault(found[0], {}).setdefault(placeholder_components.CONFIG_KEY, {})
            kept[found[1]] = placeholder_components.as_messages(text)
        else:
            texts[component] = text
    return texts, config
