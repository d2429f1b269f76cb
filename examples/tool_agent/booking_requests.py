"""The booking requests the sample traces answer, generated from templates, and the
stand-in for the human who checked each booking.

A request names a weekday and, in most, a time that is free on it (so a good agent can
always do what was asked); the phrasing varies. The "annotation" passes a trace when the
agent made a booking the calendar accepted on the day asked, at the time asked if one
was named.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from examples.tool_agent.calendar_tools import CALENDAR, DAYS

WITH_TIME = (
    "Book me a meeting on {day} at {time}.",
    "Can you put a call in my calendar for {day} at {time}?",
    "I need a meeting {day} {time}, please book it.",
    "Schedule a sync with Anna on {day} at {time}.",
    "Please reserve {time} on {day} for the team review.",
)
ANY_TIME = (
    "Book me a meeting on {day}, any free time is fine.",
    "Find a free slot on {day} and book it.",
    "I need half an hour with the team on {day}. Book whatever is free.",
)
SHARE_WITH_TIME = 0.6
_BOOKED = re.compile(r"^Booked (\w+) at (\d\d:\d\d)\.$")


@dataclass(frozen=True)
class BookingRequest:
    text: str
    day: str
    time: str | None  # None: any free time on the day will do


def generate(count: int, rng: random.Random) -> list[BookingRequest]:
    requests = []
    for _ in range(count):
        day = rng.choice(DAYS)
        if rng.random() < SHARE_WITH_TIME:
            time = rng.choice(CALENDAR[day])
            text = rng.choice(WITH_TIME).format(day=day, time=time)
        else:
            time, text = None, rng.choice(ANY_TIME).format(day=day)
        requests.append(BookingRequest(text, day, time))
    return requests


def booking_made(results: list[str]) -> tuple[str, str] | None:
    """The (day, time) of the last booking the calendar confirmed, from the tools' results."""
    booked = [m.groups() for m in map(_BOOKED.match, results) if m]
    return booked[-1] if booked else None


def verdict(request: BookingRequest, results: list[str]) -> tuple[bool, str]:
    """Pass or fail, and the annotator's comment."""
    made = booking_made(results)
    asked = f"{request.day} at {request.time}" if request.time else f"{request.day}, any time"
    if made is None:
        return False, f"asked for {asked}; nothing was booked"
    day, time = made
    if day != request.day or (request.time and time != request.time):
        return False, f"asked for {asked}; booked {day} at {time} instead"
    return True, f"correct: booked {day} at {time}"
