"""A file the user names (a skill, a harness's instructions) as a component.

Agents often fill a prompt variable from a file of their own: `{{skill}}` holds the text
of `skills/booking.md`. Named in `[replay] component_files` (variable -> file), that text
is a component, `files.<variable>`, seeded from the file as it is now (what the team
keeps, not what an old trace recorded), and every replayed call of a prompt that uses the
variable gets the candidate's text there. It is registered in MLflow with the prompts,
and a winner is published into the config (`files`, variable -> text) of each managed
prompt that uses it, where the agent reads it; the file itself is the team's to update.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

PREFIX = "files."
CONFIG_KEY = "files"  # a Langfuse prompt's config: variable -> the file's text


def component_name(variable: str) -> str:
    return f"{PREFIX}{variable}"


def variable_of(component: str) -> str | None:
    """The prompt variable a file component fills; None for any other component."""
    return component.removeprefix(PREFIX) if component.startswith(PREFIX) else None


def load_files(named: Mapping[str, str], root: Path | None = None) -> dict[str, str]:
    """Each named file's text by the variable it fills; ValueError naming the setting and
    the file when one cannot be read."""
    texts = {}
    for variable, name in named.items():
        path = Path(name) if root is None or Path(name).is_absolute() else root / name
        try:
            texts[variable] = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise ValueError(
                f"replay.component_files.{variable}: cannot read {str(path)!r} "
                f"({type(err).__name__}): name a text file"
            ) from err
    return texts


def file_variables(candidate: Mapping[str, str], used: list[str]) -> dict[str, str]:
    """The candidate's text for each variable in `used` that a file component fills."""
    return {
        variable: text
        for component, text in candidate.items()
        if (variable := variable_of(component)) is not None and variable in used
    }
