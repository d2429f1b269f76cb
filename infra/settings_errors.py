"""Settings that cannot load, as one sentence: the file, the section, the key, and the
closest valid key, instead of pydantic's or tomllib's traceback.

`load_settings` is what the command line calls; `Settings()` itself still raises the
libraries' own errors, which tests and library users may want whole.
"""

from __future__ import annotations

import difflib
import os
import tomllib
import types
import typing
from pathlib import Path

from pydantic import BaseModel, ValidationError

from infra.errors import UserFacingError
from infra.settings import Settings, config_path


class SettingsError(UserFacingError):
    """The settings cannot be loaded; the message says where and how to fix them."""


def load_settings() -> Settings:
    """The settings, or a `SettingsError` that names the file (or environment variable),
    the section, the key and what is wrong with it."""
    path, named = config_path()
    if named and not path.is_file():
        raise SettingsError(f"the settings file {path} does not exist (FLYWHEEL_CONFIG)")
    try:
        return Settings()
    except tomllib.TOMLDecodeError as error:
        raise SettingsError(f"{path} is not valid TOML: {error}") from None
    except ValidationError as error:
        raise SettingsError(explain(error, path)) from None


def explain(error: ValidationError, path: Path) -> str:
    """The first problem as a sentence (and how many more there are)."""
    problems = error.errors()
    first = problems[0]
    location = tuple(str(part) for part in first["loc"])
    env = "FLYWHEEL_" + "__".join(location).upper()
    where = f"the environment variable {env}" if env in os.environ else str(path)
    section = f"[{'.'.join(location[:-1])}] " if len(location) > 1 else ""
    key = location[-1] if location else "?"
    if first["type"] == "extra_forbidden":
        said = f"{where}: {section}has no key {key!r}"
        closest = difflib.get_close_matches(key, _keys(location[:-1]), n=1)
        said += f" (did you mean {closest[0]!r}?)" if closest else ""
    else:
        got = first.get("input")
        shown = "" if isinstance(got, dict) else f" (got {got!r})"
        said = f"{where}: {section}{key}: {first['msg']}{shown}"
    more = len(problems) - 1
    return said + (f"; and {more} more problem{'s' * (more > 1)}" if more else "")


def _keys(section: tuple[str, ...]) -> list[str]:
    """The valid keys of a settings section (the top level for an empty one)."""
    model: type[BaseModel] | None = Settings
    for part in section:
        field = model.model_fields.get(part) if model else None
        model = _model_of(field.annotation) if field else None
    return list(model.model_fields) if model else []


def _model_of(annotation) -> type[BaseModel] | None:
    """The settings model a field holds (`LMSettings | None` included)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        for arg in typing.get_args(annotation):
            if (found := _model_of(arg)) is not None:
                return found
    return None
