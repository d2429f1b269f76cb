"""The error of a record that cannot be read or sent: a trace, a score, a label request."""


class RecordError(ValueError):
    """A record that cannot be mapped; `field` names the offending key."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
