"""What the engine already read, kept: a night asks the judge about the same prompt many
times (fitting its cut, its held-out agreement, the reward head's features, the gate, the
verdicts on the night's traces), and on a CPU the teacher's prefill is most of a night.
The engine is batch-invariant (`invariance.py`), so a reading kept is bit for bit the one
a second prefill would give."""

from __future__ import annotations

from array import array
from collections import OrderedDict
from collections.abc import Hashable


class Readings:
    """Least recently used readings (choice log-probabilities, features) per prompt, each
    under the adapter that made it; an adapter loaded again under its name forgets its."""

    def __init__(self, capacity: int = 4096):
        self.capacity = capacity
        self._kept: OrderedDict[tuple[Hashable, ...], array] = OrderedDict()
        self.hits = 0

    def get(self, key: tuple[Hashable, ...]) -> list[float] | None:
        found = self._kept.get(key)
        if found is None:
            return None
        self._kept.move_to_end(key)
        self.hits += 1
        return found.tolist()

    def put(self, key: tuple[Hashable, ...], values: list[float]) -> list[float]:
        if self.capacity > 0:
            self._kept[key] = array("d", values)  # 8 bytes a value, not a float object's 24
            while len(self._kept) > self.capacity:
                self._kept.popitem(last=False)
        return values

    def forget(self, adapter: str | None) -> None:
        """Every reading made under `adapter` (its key's last part)."""
        for key in [k for k in self._kept if k[-1] == adapter]:
            del self._kept[key]
