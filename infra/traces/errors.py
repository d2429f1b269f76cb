"""The error of a record that cannot be read or sent: a trace, a score, a label request."""

from typing import Any


class RecordError(ValueError):
    """A record that cannot be mapped; `field` names the offending key."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def described(value: Any) -> str:
    """`value` for an error message: numbers as they are, text by its length only, since
    the message is logged before any masking and the text may be a pasted secret."""
    if value is None or isinstance(value, bool | int | float):
        return repr(value)
    if isinstance(value, str):
        return f"a string of {len(value)} characters" if value else "an empty string"
    return f"a {type(value).__name__}"
