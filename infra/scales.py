"""What a score can be: the scale a judge answers on and humans annotate on.

A scale is boolean, categorical (labelled values, ranked or not) or numeric (with an
optional range), so a judge can be built for any score the humans use; a trace source
reads one from its score config (`infra.traces.score_scale`). The scale decides how a
judge's text is parsed and which agreement metrics make sense.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

Kind = Literal["boolean", "categorical", "numeric"]
KINDS: tuple[Kind, ...] = ("boolean", "categorical", "numeric")
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
    values: tuple[float, ...] | None = None  # the source's numeric value per category
    minimum: float | None = None  # numeric only; None means unbounded
    maximum: float | None = None
    ordinal: bool = False  # categorical only: whether the category order is a ranking
    name: str | None = None  # the score name this scale belongs to, when known

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ScaleError("kind", f"{self.kind!r} is not one of {', '.join(KINDS)}")
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
    def infer(cls, values: Iterable[Any], kind: str) -> ScoreScale:
        """The narrowest scale of `kind` (boolean, categorical or numeric, in any case) that
        holds the observed annotation values. Categories come sorted (the order humans meant
        is unknown, so not ordinal); a numeric range is the observed one, or unbounded when
        nothing was observed."""
        kind = _kind(kind, "kind")
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
        numbers = [finite_number(v, "values") for v in seen]
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

    def describe(self) -> str:
        """The scale in a few words, e.g. "numeric 1 to 5" or "categorical (bad, good)"."""
        if self.kind == "categorical":
            ranked = " < ".join(self.categories) if self.ordinal else ", ".join(self.categories)
            return f"{'ordinal ' if self.ordinal else ''}categorical ({ranked})"
        if self.kind == "boolean":
            return "boolean"
        low, high = self.minimum, self.maximum
        if low is None and high is None:
            return "numeric"
        if high is None:
            return f"numeric from {low:g}"
        return f"numeric up to {high:g}" if low is None else f"numeric {low:g} to {high:g}"

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
            values = tuple(finite_number(v, "values") for v in self.values)
            object.__setattr__(self, "values", values)

    def _check_range(self) -> None:
        low = _number_or_none(self.minimum, "minimum")
        high = _number_or_none(self.maximum, "maximum")
        if low is not None and high is not None and low > high:
            raise ScaleError("maximum", f"{high} is below the minimum {low}")
        # Stored as floats so 1 and 1.0 compare and hash alike everywhere downstream.
        object.__setattr__(self, "minimum", low)
        object.__setattr__(self, "maximum", high)


def _kind(name: Any, field: str) -> Kind:
    """One of our kinds, in any case."""
    kind = name.lower() if isinstance(name, str) else None
    if kind not in KINDS:
        raise ScaleError(field, f"{name!r} is not boolean, categorical or numeric")
    return kind


def finite_number(value: Any, field: str) -> float:
    """`value` as a float; a ScaleError naming `field` when it is not a finite number."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ScaleError(field, f"expected a finite number, got {value!r}")
    return float(value)


def _number_or_none(value: Any, field: str) -> float | None:
    return None if value is None else finite_number(value, field)
