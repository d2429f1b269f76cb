"""A Langfuse score config read as a ScoreScale: the scale humans annotate on.

Configs come in the public API's shape (`GET /api/public/score-configs` items: name,
dataType, categories [{label, value}], minValue, maxValue), from Langfuse itself or a
JSONL export. Langfuse does not say whether categories are ranked, so the caller does.
"""

from __future__ import annotations

from typing import Any

from infra.errors import UserFacingError
from infra.scales import Kind, ScaleError, ScoreScale, finite_number
from infra.traces.source import newest_active_config
from infra.traces.types import KIND_OF


def scale_from_config(config: dict[str, Any], *, ordinal: bool = False) -> ScoreScale:
    """The scale of one score config; a ScaleError naming the config's field when it
    cannot be read. `ordinal`: whether a categorical config's categories are ranked,
    lowest first."""
    if not isinstance(config, dict):
        raise ScaleError("<config>", f"expected an object, got {type(config).__name__}")
    kind = _kind(config.get("dataType"))
    name = config.get("name")
    if name is not None and not isinstance(name, str):
        raise ScaleError("name", f"expected a string, got {name!r}")
    if kind == "boolean":  # Langfuse fills in True/False categories itself: not ours
        return ScoreScale("boolean", name=name)
    if kind == "numeric":
        low = _number_or_none(config.get("minValue"), "minValue")
        high = _number_or_none(config.get("maxValue"), "maxValue")
        return ScoreScale("numeric", minimum=low, maximum=high, name=name)
    raw = config.get("categories")
    if not isinstance(raw, list) or not raw:
        raise ScaleError("categories", "a CATEGORICAL config needs a non-empty list")
    labels, values = [], []
    for i, category in enumerate(raw):
        if not isinstance(category, dict):
            raise ScaleError(f"categories[{i}]", "expected an object with label and value")
        label = category.get("label")
        if not isinstance(label, str) or not label.strip():
            raise ScaleError(f"categories[{i}].label", f"expected a name, got {label!r}")
        labels.append(label)
        values.append(finite_number(category.get("value"), f"categories[{i}].value"))
    return ScoreScale("categorical", tuple(labels), tuple(values), ordinal=ordinal, name=name)


def scale_in_force(
    name: str, configs: list[dict[str, Any]], *, ordinal: bool = False
) -> ScoreScale | None:
    """The scale of the config in force among `configs` (all named `name`), or None when
    there is none; a config that cannot be read stops the night with the fix."""
    config = newest_active_config(configs)
    if config is None:
        return None
    try:
        return scale_from_config(config, ordinal=ordinal)
    except ScaleError as err:
        raise UserFacingError(
            f"The Langfuse score config {name!r} cannot be read ({err}): fix it in the "
            "project's score configs, or annotate with another one (traces.annotation_name)."
        ) from err


def _kind(data_type: Any) -> Kind:
    """A Langfuse dataType, in any case."""
    kind = KIND_OF.get(data_type.upper()) if isinstance(data_type, str) else None
    if kind is None:
        raise ScaleError("dataType", f"{data_type!r} is not BOOLEAN, CATEGORICAL or NUMERIC")
    return kind


def _number_or_none(value: Any, field: str) -> float | None:
    return None if value is None else finite_number(value, field)
