"""The configuration reference, docs/configuration.md, rendered from the settings' own
docstrings (`infra.settings`), so the two cannot drift apart:

    python -m infra.settings_reference > docs/configuration.md

`tests/infra/test_settings_reference.py` fails when the committed file differs from `render()`.
"""

from __future__ import annotations

import inspect
import json
import re
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types as at
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo

import infra.settings
from infra.settings import NightKnobs, Settings

COMMAND = "python -m infra.settings_reference > docs/configuration.md"


@dataclass(frozen=True)
class SectionDoc:
    """One TOML section: its dotted key ("judge.lora"), its model, the values it has by
    default there (a model's defaults can differ by where it sits: [reflection] is the
    teacher), and the description of the field that holds it."""

    key: str
    model: type[BaseModel]
    default: BaseModel
    description: str | None

    @property
    def depth(self) -> int:
        return self.key.count(".")


def sections() -> list[SectionDoc]:
    """Every section under `Settings`, parents before the sections nested in them."""
    return list(_walk(Settings, None, ""))


def models() -> list[type[BaseModel]]:
    """Every settings model reachable from `Settings` and `NightKnobs`, each once."""
    found = [Settings, NightKnobs] + [s.model for s in sections()]
    return list(dict.fromkeys(found))


def section_model(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds, when the field is a section (`X` or `X | None`)."""
    if get_origin(annotation) in (Union, types.UnionType):
        inner = [a for a in get_args(annotation) if a is not type(None)]
        return section_model(inner[0]) if len(inner) == 1 else None
    if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
        return annotation
    return None


def entry_model(annotation: Any) -> type[BaseModel] | None:
    """The model of each entry, when the field is a table of sections (`dict[str, X]`,
    e.g. `traces.criteria`: one section per name the user picks)."""
    if get_origin(annotation) is dict:
        return section_model(get_args(annotation)[1])
    return None


def _walk(model: type[BaseModel], default: BaseModel | None, prefix: str) -> Iterator[SectionDoc]:
    for name, field in model.model_fields.items():
        key = f"{prefix}.{name}" if prefix else name
        if (entry := entry_model(field.annotation)) is not None:  # its entries' keys
            yield SectionDoc(f"{key}.<name>", entry, entry(), field.description)
            continue
        sub = section_model(field.annotation)
        if sub is None:
            continue
        value = _default(field) if default is None else getattr(default, name)
        doc = SectionDoc(key, sub, value if value is not None else sub(), field.description)
        yield doc
        yield from _walk(sub, doc.default, key)


def _default(field: FieldInfo) -> Any:
    return field.get_default(call_default_factory=True, validated_data={})


def render() -> str:
    """docs/configuration.md."""
    night = ", ".join(f"`{name}`" for name in NightKnobs.model_fields)
    out = [
        "# Configuration reference",
        "",
        f"<!-- Generated from infra/settings.py by `{COMMAND}`; do not edit by hand. -->",
        "",
        inspect.cleandoc(infra.settings.__doc__ or ""),
        "",
        "Every key below is written in `flywheel.toml` under its section, or set in the "
        "environment as `FLYWHEEL_<SECTION>__<KEY>` (nested sections join with `__` too: "
        "`FLYWHEEL_JUDGE__LORA__RANK=16`; top-level keys are `FLYWHEEL_<KEY>`). Arrays and "
        "tables are written there as JSON, and `null` sets a key that may be none (TOML "
        "has no null). Keys marked *environment only* are secrets: the TOML file refuses "
        "them.",
        "",
        f"{_text(NightKnobs.__doc__)} These night knobs are {night}.",
        "",
        "## Top-level keys",
        "",
        *_table(Settings, None),
    ]
    tabled: dict[type[BaseModel], SectionDoc] = {}
    for section in sections():
        out += ["", f"{'#' * (2 + section.depth)} [{section.key}]", ""]
        first = tabled.get(section.model)
        if first is None:
            tabled[section.model] = section
            out += [inspect.cleandoc(section.model.__doc__ or ""), ""]
            out += _table(section.model, section.default)
        else:  # the same keys as a section already listed, with defaults of its own
            out += [_text(section.description), "", _same_keys(section, first)]
    return "\n".join(out) + "\n"


def _same_keys(section: SectionDoc, first: SectionDoc) -> str:
    changed = [
        f"`{name} = {_value(getattr(section.default, name))}`"
        for name in section.model.model_fields
        if getattr(section.default, name) != getattr(first.default, name)
    ]
    line = f"The keys of `[{first.key}]`"
    return (
        f"{line}, with these defaults of its own: {', '.join(changed)}." if changed else line + "."
    )


def _table(model: type[BaseModel], default: BaseModel | None) -> list[str]:
    rows = ["| Key | Type | Default | Description |", "| --- | --- | --- | --- |"]
    for name, field in model.model_fields.items():
        if section_model(field.annotation) is not None:
            continue
        if _is_secret(field.annotation):
            value = "*environment only*"
        else:
            value = f"`{_value(_default(field) if default is None else getattr(default, name))}`"
        kind = _type(field.annotation, field.metadata)
        rows.append(f"| `{name}` | {kind} | {value} | {_cell(_text(field.description))} |")
    return rows


def _text(doc: str | None) -> str:
    """A docstring as one paragraph."""
    return " ".join((doc or "").split())


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _is_secret(annotation: Any) -> bool:
    return annotation is SecretStr or SecretStr in get_args(annotation)


_NAMES = {
    str: "string",
    int: "integer",
    float: "float",
    bool: "boolean",
    Path: "path",
    SecretStr: "secret string",
}


def _type(annotation: Any, metadata: list[Any] | tuple[Any, ...] = ()) -> str:
    """A field's type as a reader of the TOML file thinks of it, constraints included."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return _type(args[0], [*metadata, *annotation.__metadata__])
    if origin in (Union, types.UnionType):
        kinds = [_type(a, metadata) for a in args if a is not type(None)]
        return " or ".join(kinds + ["none"] * (type(None) in args))
    if origin is Literal:
        return "one of " + ", ".join(f"`{json.dumps(v)}`" for v in args)
    if origin is list:
        return _constrained(f"array of {_type(args[0])}", metadata)
    if origin is dict and section_model(args[1]) is not None:
        return "table of sections (below)"
    if origin is dict:
        return _constrained(f"table of {_type(args[1])}", metadata)
    if annotation not in _NAMES:
        raise ValueError(f"infra.settings_reference cannot name the type {annotation!r}")
    return _constrained(_NAMES[annotation], metadata)


_BOUNDS = {at.Gt: ("gt", ">"), at.Ge: ("ge", ">="), at.Lt: ("lt", "<"), at.Le: ("le", "<=")}


def _constrained(name: str, metadata: list[Any] | tuple[Any, ...]) -> str:
    parts = []
    for item in metadata:
        if type(item) in _BOUNDS:
            attribute, sign = _BOUNDS[type(item)]
            bound = getattr(item, attribute)
            parts.append(f"{sign} {_value(int(bound) if bound == int(bound) else bound)}")
        elif isinstance(item, at.MinLen):
            parts.append(f"(at least {item.min_length})")
        else:
            raise ValueError(f"infra.settings_reference cannot describe constraint {item!r}")
    return f"{name} {', '.join(parts)}" if parts else name


def _value(value: Any) -> str:
    """A value as TOML writes it (none, which TOML has no word for, as `null`)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return re.sub(r"e([+-])0*(\d)", r"e\1\2", repr(value))
    if isinstance(value, Path):
        return json.dumps(str(value))
    if isinstance(value, BaseModel):
        return json.dumps(value.model_dump(mode="json"))
    return json.dumps(value)


if __name__ == "__main__":
    print(render(), end="")
