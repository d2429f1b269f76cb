"""The booking agent's one Langfuse-managed prompt (version 1) and its tools' definitions.

`book-meeting` is a CHAT prompt: a system message (the agent's instructions, the one
component flywheel optimizes), two worked bookings, then the user's request
(`{{request}}`). The tool definitions are OpenAI's shape; they go to the model with every
call and are recorded beside the messages, which is how the replay knows a generation
could call tools.
"""

from __future__ import annotations

import json

BOOK_MEETING = "book-meeting"

# Plain instructions. They never say what to do when no time is named or when a time is
# taken (look the day up first, book a time it lists), so a night has something to learn.
SYSTEM = (
    "You book meetings in the user's calendar with two tools: find_slot(day) lists the "
    "free times on a day, book(day, time) books one. When the booking is done, tell the "
    "user the day and time in one sentence."
)


def _call(name: str, **arguments: str) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


# Two bookings shown as chat turns, fixed parts of the prompt: the 135M model writes tool
# calls after seeing some (tests/tool_chats.py), and almost never from instructions alone,
# not even with the same examples written inside the system message.
WORKED_EXAMPLES = [
    {"role": "user", "content": "Book me a meeting on Monday at 11:00."},
    {"role": "assistant", "content": _call("book", day="Monday", time="11:00")},
    {"role": "tool", "content": "Booked Monday at 11:00."},
    {"role": "assistant", "content": "Your meeting is booked on Monday at 11:00."},
    {"role": "user", "content": "Find a free time on Friday and book it."},
    {"role": "assistant", "content": _call("find_slot", day="Friday")},
    {"role": "tool", "content": "Free on Friday: 10:00, 12:00, 14:00."},
    {"role": "assistant", "content": _call("book", day="Friday", time="10:00")},
    {"role": "tool", "content": "Booked Friday at 10:00."},
    {"role": "assistant", "content": "Your meeting is booked on Friday at 10:00."},
]

BOOKING_PROMPT = [
    {"role": "system", "content": SYSTEM},
    *WORKED_EXAMPLES,
    {"role": "user", "content": "{{request}}"},
]


def _function(name: str, description: str, *parameters: str) -> dict:
    # bare string parameters: the 135M model copies a richer schema into its arguments
    properties = {parameter: {"type": "string"} for parameter in parameters}
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": [*parameters]},
        },
    }


TOOLS = [
    _function("find_slot", "List the free times on a day", "day"),
    _function("book", "Book a meeting at a time on a day", "day", "time"),
]
