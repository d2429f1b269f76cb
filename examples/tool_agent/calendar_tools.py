"""The booking agent's two tools, on a small fixed calendar, offline.

The calendar never changes (a booking does not take the slot away), so the tools are pure
functions of their arguments: the agent calls them while it records its traces, and
flywheel's replay calls the same functions as stand-ins (`replay.tool_functions` in
flywheel.toml) for a call no trace recorded. Each takes the call's arguments as a dict
and returns the text the model reads back, as a tool would.
"""

from __future__ import annotations

from typing import Any

DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")

# The free times of a working week: a few per day, different each day, so that a model
# that books without looking (or on the wrong day) is often refused.
CALENDAR: dict[str, tuple[str, ...]] = {
    "Monday": ("09:00", "11:00", "15:00"),
    "Tuesday": ("10:00", "14:00"),
    "Wednesday": ("09:00", "13:00", "16:00"),
    "Thursday": ("11:00", "15:00"),
    "Friday": ("10:00", "12:00", "14:00"),
}


def day_named(value: Any) -> str | None:
    """The calendar day a model's argument names ("tuesday", " Tuesday "), or None."""
    text = str(value or "").strip().lower()
    return next((day for day in DAYS if day.lower() == text), None)


def time_named(value: Any) -> str:
    """A time as the calendar writes it: "9:00" and "09:00" are the same slot."""
    text = str(value or "").strip()
    hours, _, minutes = text.partition(":")
    if hours.isdigit() and minutes.isdigit():
        return f"{int(hours):02d}:{minutes}"
    return text


def find_slot(arguments: dict[str, Any]) -> str:
    """The free times on a day."""
    day = day_named(arguments.get("day"))
    if day is None:
        return f"No such day: {arguments.get('day')!r}. Days: {', '.join(DAYS)}."
    return f"Free on {day}: {', '.join(CALENDAR[day])}."


def book(arguments: dict[str, Any]) -> str:
    """A confirmation when the slot is free, else a refusal naming the free times."""
    day = day_named(arguments.get("day"))
    if day is None:
        return f"Not booked: no such day {arguments.get('day')!r}. Days: {', '.join(DAYS)}."
    time = time_named(arguments.get("time"))
    if time not in CALENDAR[day]:
        free = ", ".join(CALENDAR[day])
        return f"Not booked: {time or 'no time'} is not free on {day}. Free: {free}."
    return f"Booked {day} at {time}."


TOOL_FUNCTIONS = {"find_slot": find_slot, "book": book}


def run_tool(name: str, arguments: dict[str, Any]) -> str:
    """The named tool's result; a tool that does not exist answers so, as an API would."""
    function = TOOL_FUNCTIONS.get(name)
    if function is None:
        return f"No such tool: {name!r}. Tools: {', '.join(TOOL_FUNCTIONS)}."
    return function(arguments)
