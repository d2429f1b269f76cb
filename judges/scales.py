"""What a score can be: the scale a judge answers on and humans annotate on.

Mirrors a Langfuse score config (BOOLEAN, CATEGORICAL with labelled values, NUMERIC
with an optional range) so a judge can be built for any score the humans use. The
scale decides how a judge's text is parsed and which agreement metrics make sense.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

Kind = Literal["boolean", "categorical", "numeric"]
_KINDS = ("boolean", "categorical", "numeric")
# Beyond this many integer steps a numeric scale is treated as continuous: exact match
# and weighted kappa stop meaning much, and rank correlation is what is left.
MAX_LEVELS = 101


class ScaleError(ValueError):
    """An invalid scale; `field` names the offending field."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field


@dataclass(frozen=True)
class ScoreScale:
    kind: Kind
    categories: tuple[str, ...] = ()  # categorical only, in order (lowest first if ordinal)
    values: tuple[float, ...] | None = None  # Langfuse's numeric value per category
    minimum: float | None = None  # numeric only; None means unbounded
    maximum: float | None = None
    ordinal: bool = False  # categorical only: whether the category order is a ranking
    name: str | None = None  # the score name this scale belongs to, when known

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ScaleError("kind", f"{self.kind!r} is not one of {', '.join(_KINDS)}")
        if self.kind == "categorical":
            self._check_categories()
        elif self.categories or self.values is not None:
            raise ScaleError("categories", f"a {self.kind} scale has no categories")
        if self.ordinal and self.kind != "categorical":
            raise ScaleError("ordinal", "only a categorical scale can be marked ordinal")
        if self.kind == "numeric":
            self._check_range()
        elif self.minimum is not None or self.maximum is not None:
            raise ScaleError("minimum", f"a {self.kind} scale has no range")

    @classmethod
    def from_langfuse(cls, config: dict[str, Any], *, ordinal: bool = False) -> ScoreScale:
        """From a Langfuse score config (public API shape: dataType, categories
        [{label, value}], minValue, maxValue). Langfuse does not say whether categories
        are ranked, so the caller does, with `ordinal`."""
        if not isinstance(config, dict):
            raise ScaleError("<config>", f"expected an object, got {type(config).__name__}")
        kind = _kind(config.get("dataType"), "dataType")
        name = config.get("name")
        if name is not None and not isinstance(name, str):
            raise ScaleError("name", f"expected a string, got {name!r}")
        if kind == "boolean":  # Langfuse fills in True/False categories itself: not ours
            return cls("boolean", name=name)
        if kind == "numeric":
            low = _number_or_none(config.get("minValue"), "minValue")
            high = _number_or_none(config.get("maxValue"), "maxValue")
            return cls("numeric", minimum=low, maximum=high, name=name)
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
            values.append(_number(category.get("value"), f"categories[{i}].value"))
        return cls("categorical", tuple(labels), tuple(values), ordinal=ordinal, name=name)

    @classmethod
    def infer(cls, values: Iterable[Any], data_type: str) -> ScoreScale:
        """The narrowest scale that holds the observed annotation values. Categories come
        sorted (the order humans meant is unknown, so not ordinal); a numeric range is the
        observed one, or unbounded when nothing was observed."""
        kind = _kind(data_type, "data_type")
        seen = list(values)
        if kind == "boolean":
            bad = [v for v in seen if v not in (0, 1)]  # True/False and 1.0/0.0 included
            if bad:
                raise ScaleError("values", f"a boolean score is 0 or 1, got {bad[0]!r}")
            return cls("boolean")
        if kind == "categorical":
            bad = [v for v in seen if not isinstance(v, str)]
            if bad:
                raise ScaleError("values", f"categories are names, got {bad[0]!r}")
            if not seen:
                raise ScaleError("values", "no values to infer the categories from")
            return cls("categorical", tuple(sorted(set(seen))))
        numbers = [_number(v, "values") for v in seen]
        if not numbers:
            return cls("numeric")
        return cls("numeric", minimum=min(numbers), maximum=max(numbers))

    def contains(self, value: Any) -> bool:
        if self.kind == "boolean":
            return isinstance(value, bool)
        if self.kind == "categorical":
            return value in self.categories
        if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
            return False
        return (self.minimum is None or value >= self.minimum) and (
            self.maximum is None or value <= self.maximum
        )

    @property
    def levels(self) -> tuple[Any, ...] | None:
        """The ranked values, lowest first, when the scale is ordinal and discrete: the
        categories of an ordinal categorical scale, or every integer of a bounded
        integer range. None when there is no such order (nominal, boolean, continuous)."""
        if self.kind == "categorical":
            return self.categories if self.ordinal else None
        if self.kind != "numeric" or self.minimum is None or self.maximum is None:
            return None
        if not (self.minimum.is_integer() and self.maximum.is_integer()):
            return None
        if self.maximum - self.minimum >= MAX_LEVELS:
            return None
        return tuple(float(v) for v in range(int(self.minimum), int(self.maximum) + 1))

    def _check_categories(self) -> None:
        if not self.categories:
            raise ScaleError("categories", "a categorical scale needs at least one category")
        for category in self.categories:
            if not isinstance(category, str) or not category.strip():
                raise ScaleError("categories", f"expected non-empty names, got {category!r}")
        # Judges' text is matched case-insensitively, so "Good" and "good" would collide.
        if len({c.strip().casefold() for c in self.categories}) != len(self.categories):
            raise ScaleError("categories", "names must differ ignoring case")
        object.__setattr__(self, "categories", tuple(self.categories))
        if self.values is not None:
            if len(self.values) != len(self.categories):
                raise ScaleError("values", "one value per category")
            values = tuple(_number(v, "values") for v in self.values)
            object.__setattr__(self, "values", values)

    def _check_range(self) -> None:
        low = _number_or_none(self.minimum, "minimum")
        high = _number_or_none(self.maximum, "maximum")
        if low is not None and high is not None and low > high:
            raise ScaleError("maximum", f"{high} is below the minimum {low}")
        # Stored as floats so 1 and 1.0 compare and hash alike everywhere downstream.
        object.__setattr__(self, "minimum", low)
        object.__setattr__(self, "maximum", high)


def _kind(data_type: Any, field: str) -> Kind:
    """A Langfuse dataType (BOOLEAN, ...) or one of our kinds, in any case."""
    kind = data_type.lower() if isinstance(data_type, str) else None
    if kind not in _KINDS:
        raise ScaleError(field, f"{data_type!r} is not BOOLEAN, CATEGORICAL or NUMERIC")
    return kind


def _number(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ScaleError(field, f"expected a finite number, got {value!r}")
    return float(value)


def _number_or_none(value: Any, field: str) -> float | None:
    return None if value is None else _number(value, field)
