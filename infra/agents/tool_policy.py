"""What a replayed tool call gets back, when a candidate asks for a call the trace may not
have made.

A call equal to a recorded one (same tool, same arguments once normalized) gets that
result. Otherwise, in order, the first that answers:
- **reused**: the trace's own recorded result for this call;
- **looked up**: a result recorded for the same call in another trace of the night;
- **simulated**: an offline function the user registered for the tool by name
  (`replay.tool_functions`), which takes the arguments and returns the result;
- **stopped**: nothing answers, so the trajectory ends at the call and the step is judged
  on the call itself (the right tool, the right arguments).

No tool is ever called except through a function the user named: a changed call never
reaches a live system unless the user put one behind that name.
"""

from __future__ import annotations

import importlib
import json
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from infra.lm.tools import ToolCall

HOW = ("reused", "looked_up", "simulated", "stopped")  # in the order they are tried
Key = tuple[str, str]  # ToolCall.key(): name, normalized arguments
ToolFunction = Callable[[dict[str, Any]], Any]


class ToolPolicy:
    """Results recorded across the night's traces, and the user's offline functions."""

    def __init__(self, functions: Mapping[str, ToolFunction] | None = None):
        self.functions = dict(functions or {})
        self.recorded: dict[Key, str] = {}

    def remember(self, results: Mapping[Key, str]) -> None:
        """A planned trace's recorded results, for the calls of other traces."""
        for key, result in results.items():
            self.recorded.setdefault(key, result)

    def resolve(self, call: ToolCall, own: Mapping[Key, str]) -> tuple[str | None, str]:
        """The call's result and how it was found (one of HOW); None when stopped."""
        key = call.key()
        if key in own:
            return own[key], "reused"
        if key in self.recorded:
            return self.recorded[key], "looked_up"
        function = self.functions.get(call.name)
        if function is not None:
            result = function(dict(call.arguments))
            return result if isinstance(result, str) else json.dumps(result), "simulated"
        return None, "stopped"


def tally(counts: Counter[str]) -> str:
    """'3 reused, 1 looked up, 0 simulated, 2 stopped'."""
    return ", ".join(f"{counts[how]} {how.replace('_', ' ')}" for how in HOW)


def load_tool_functions(named: Mapping[str, str]) -> dict[str, ToolFunction]:
    """Tool name -> the function at 'package.module:function', or ValueError naming it."""
    functions: dict[str, ToolFunction] = {}
    for tool, entry_point in named.items():
        module_name, _, attribute = entry_point.partition(":")
        try:
            function = getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError, ValueError) as error:
            raise ValueError(
                f"replay.tool_functions.{tool}: cannot load {entry_point!r} "
                f"(expected 'package.module:function'): {error}"
            ) from error
        if not callable(function):
            raise ValueError(f"replay.tool_functions.{tool}: {entry_point!r} is not callable")
        functions[tool] = function
    return functions
