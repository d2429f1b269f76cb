"""The scale of the night's annotation, and each annotation's value on it.

The source's score config says the scale when it has one (Langfuse); otherwise (a JSONL
export) it is inferred from the annotations themselves. Langfuse does not say whether
categories are ranked: `judge.ordinal_categories` does.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import replace
from typing import Any

from infra.errors import UserFacingError
from infra.traces import Annotation
from judges.scales import ScaleError, ScoreScale

Value = bool | str | float


def night_scale(
    name: str, config: dict[str, Any] | None, annotations: list[Annotation], ordinal: bool
) -> ScoreScale:
    """The scale of score `name`, from its config or else from its `annotations`."""
    if config is not None:
        try:
            return ScoreScale.from_langfuse(config, ordinal=ordinal)
        except ScaleError as err:
            raise UserFacingError(
                f"The Langfuse score config {name!r} cannot be read ({err}): fix it in the "
                "project's score configs, or annotate with another one (traces.annotation_name)."
            ) from err
    if not annotations:  # nothing to learn from tonight: pass/fail, as before scales
        return ScoreScale("boolean", name=name)
    counts = Counter(a.data_type for a in annotations)
    data_type = max(sorted(counts), key=counts.__getitem__)  # a stray other type is skipped
    values = [a.value for a in annotations if a.data_type == data_type and _finite(a.value)]
    return replace(ScoreScale.infer(values, data_type), name=name)


def value_on(scale: ScoreScale, annotation: Annotation) -> Value | None:
    """The annotation's value on the scale (bool, category or number); None when off it."""
    if annotation.data_type.lower() != scale.kind:
        return None
    value = annotation.value
    if scale.kind == "boolean" and value in (0, 1):
        value = value == 1  # Langfuse gives a boolean as 1.0 / 0.0
    return value if scale.contains(value) else None


def describe(scale: ScoreScale) -> str:
    """The scale in a few words, e.g. "numeric 1 to 5" or "categorical (bad, good)"."""
    if scale.kind == "categorical":
        ranked = " < ".join(scale.categories) if scale.ordinal else ", ".join(scale.categories)
        return f"{'ordinal ' if scale.ordinal else ''}categorical ({ranked})"
    if scale.kind == "boolean":
        return "boolean"
    low, high = scale.minimum, scale.maximum
    if low is None and high is None:
        return "numeric"
    if high is None:
        return f"numeric from {low:g}"
    return f"numeric up to {high:g}" if low is None else f"numeric {low:g} to {high:g}"


def _finite(value: Any) -> bool:
    return not isinstance(value, float) or math.isfinite(value)
