"""A tool and tool-calling chats that the tool tests share: three bookings shown, a fourth
asked, so that even the 135M model calls the tool."""

from __future__ import annotations

import json

FIND = {
    "type": "function",
    "function": {
        "name": "find_slot",
        "description": "Find a free calendar slot on a day",
        "parameters": {
            "type": "object",
            "properties": {"day": {"type": "string"}},
            "required": ["day"],
        },
    },
}


def booked(day: str, call_id: str) -> list[dict]:
    """One turn of a tool-calling chat in OpenAI's shapes: ask, call, result, answer."""
    call = {"name": "find_slot", "arguments": json.dumps({"day": day})}
    return [
        {"role": "user", "content": f"Book me something on {day}."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": call_id, "type": "function", "function": call}],
        },
        {"role": "tool", "tool_call_id": call_id, "content": "10:00 free"},
        {"role": "assistant", "content": f"Booked {day} at 10:00."},
    ]


SHOWN_THEN_ASKED = [
    *booked("Monday", "c1"),
    *booked("Friday", "c2"),
    *booked("Sunday", "c3"),
    {"role": "user", "content": "Book me something on Tuesday."},
]
