"""Errors whose message is one sentence telling the user how to fix the problem.

The command line prints these without a traceback; anything else is a bug and keeps
its traceback.
"""


class UserFacingError(RuntimeError):
    pass


def is_transient(error: BaseException) -> bool:
    """Whether `error` (or what caused it) is a fault that waiting may cure: a dropped
    connection, a timeout, or a server answering 429 or 5xx. Bad input, a missing key
    or a 4xx is not: retrying it only delays the sentence that says how to fix it."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, TimeoutError | ConnectionError):
            return True
        if type(current).__module__.startswith("httpx") and "Transport" in _bases(current):
            return True
        status = getattr(current, "status_code", None) or getattr(
            getattr(current, "response", None), "status_code", None
        )
        if isinstance(status, int) and (status == 429 or status >= 500):
            return True
        current = current.__cause__ or current.__context__
    return False


def _bases(error: BaseException) -> str:
    return " ".join(cls.__name__ for cls in type(error).__mro__)
