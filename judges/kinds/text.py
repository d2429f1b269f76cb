"""A verdict as text, what every kind shares: reading one out of a judge's reply (what a
failed reading raises, what a bare answer looks like) and writing one for people."""

from __future__ import annotations

import re

Value = bool | str | float  # a verdict or a label: pass/fail, a category name, a number

# A bare answer must stand alone ("No." / "Yes, because"), so "No verdict is possible"
# or "True to its brief, ..." do not read as verdicts.
STANDS_ALONE = r"[ \t*_]*(?=[\n.,:;!)\-–—]|$)"


class NoVerdict(Exception):
    """Text, or a value in it, that is no verdict on the scale. Its message is the reason,
    "<cause>: <details>"; `judges.parsing` returns it as `Unparseable`, never a default."""


def leading(pattern: re.Pattern[str], text: str, expected: str) -> tuple[str, str]:
    """(the bare answer `pattern` finds at the start of `text`, the rest as its rationale);
    NoVerdict saying what was `expected` when the reply does not start with one."""
    m = pattern.match(text)
    if m is None:
        raise NoVerdict(f"no verdict: expected a leading {expected}")
    return m.group(0), unfenced(text[m.end() :]).lstrip(" \t.,:;!)-–—")


def unfenced(text: str) -> str:
    """`text` without its code-fence lines, stripped."""
    return re.sub(r"^[ \t]*```.*$", "", text, flags=re.M).strip()


def show(value: Value) -> str:
    """A value as people read it: Yes/No, the category's name, a number to two decimals."""
    if isinstance(value, bool):
        return "Yes" if value else "No"
    if isinstance(value, str):
        return value
    return f"{round(value, 2):g}"
