"""Errors whose message is one sentence telling the user how to fix the problem.

The command line prints these without a traceback; anything else is a bug and keeps
its traceback.
"""


class UserFacingError(RuntimeError):
    pass
