"""A judge's LoRA adapter, served on demand by the model that judges.

A judge version is rubric plus adapter, and every stage that judges (alignment's gate,
the agent's metric, rollouts, the night's scores) may run in a fresh process: a resumed
night, a Prefect worker. So the adapter travels as its folder, and the first judgement
asks the model to serve it, under a name derived from the folder: the same adapter is
loaded once however many judges read it, and never mistaken for the agent's.
"""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

from infra.lm import LM

# One load per event loop, model and adapter: a lock is bound to the loop it first waits on.
_loading: dict[tuple[int, int, str], asyncio.Lock] = {}


def served_name(folder: str | Path) -> str:
    """The name a judge adapter is served under: stable for a folder across processes."""
    digest = hashlib.sha256(str(Path(folder).resolve()).encode()).hexdigest()[:12]
    return f"judge-{digest}"


class ServedJudgeAdapter:
    def __init__(self, lm: LM, folder: str):
        self.lm, self.folder = lm, folder
        self.served = served_name(folder)
        self._checked = False  # asked the model once: a judge's calls need not ask again

    async def name(self) -> str:
        """The adapter's name on the model, loading it there first if it is not served."""
        if not self._checked:
            key = (id(asyncio.get_running_loop()), id(self.lm), self.served)
            lock = _loading.setdefault(key, asyncio.Lock())
            async with lock:
                if self.served not in await self.lm.adapters():
                    await self.lm.load_adapter(self.served, self.folder)
            self._checked = True
        return self.served


async def served(adapter: ServedJudgeAdapter | None) -> str | None:
    """The name a judge's calls pass the model: its adapter's, or None for the base model."""
    return None if adapter is None else await adapter.name()
