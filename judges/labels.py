"""Human annotations as the judge learns from them: the scale of the night's annotation,
each annotation's value on it, and the labelled item.

The trace source says the scale when it has a score config for it; otherwise (a JSONL
export without one) it is inferred from the annotations themselves.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import replace
from typing import Any

from infra.scales import ScoreScale
from infra.traces import Annotation
from judges.kinds import kind_of
from judges.types import JudgedItem

Value = bool | str | float


def night_scale(name: str, scale: ScoreScale | None, annotations: list[Annotation]) -> ScoreScale:
    """The scale of score `name`: `scale` (the source's) when given, else from `annotations`."""
    if scale is not None:
        return scale
    if not annotations:  # nothing to learn from tonight: pass/fail, as before scales
        return ScoreScale("boolean", name=name)
    counts = Counter(a.kind for a in annotations)
    kind = max(sorted(counts), key=counts.__getitem__)  # a stray other kind is skipped
    values = [a.value for a in annotations if a.kind == kind and _finite(a.value)]
    return replace(ScoreScale.infer(values, kind), name=name)


def value_on(scale: ScoreScale, annotation: Annotation) -> Value | None:
    """The annotation's value on the scale (bool, category or number); None when off it."""
    if annotation.kind != scale.kind:  # an annotation of another kind is off this scale
        return None
    return kind_of(scale).on_scale(annotation.value)


def agreed_value(scale: ScoreScale, values: list[Value]) -> Value | None:
    """One value for several people's labels on one trace: the one they share, the mean
    on a numeric scale; None when a pass meets a fail or categories differ, which no
    rule can settle for the judge (a person must)."""
    if len(set(values)) == 1:
        return values[0]
    return kind_of(scale).agreed(values)


def labelled_item(
    annotation: Annotation, value: Value, input_text: str, output_text: str
) -> JudgedItem:
    """The annotated exchange with the human's value (`value_on`); pass/fail also as
    `human_pass`, which the pass/fail judge reads."""
    return JudgedItem(
        id=annotation.trace_id,
        input_text=input_text,
        output_text=output_text,
        human_pass=value if isinstance(value, bool) else None,
        human_comment=annotation.comment or "",
        human_value=value,
    )


def _finite(value: Any) -> bool:
    return not isinstance(value, float) or math.isfinite(value)
