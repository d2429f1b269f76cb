"""What every judge-alignment adapter shows the reflection beside its own verdict: the
judge's one-sentence reason for each item, and the human's comment when there is one."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol


class Explains(Protocol):
    async def rationale(self, item: Any) -> str: ...


async def judge_reasons(judge: Explains, trajectories: list[tuple[Any, Any]]) -> list[str]:
    """The judge's reason for each (item, verdict) of a reflective minibatch, in order."""
    return list(await asyncio.gather(*(judge.rationale(item) for item, _ in trajectories)))


def their_comment(comment: str) -> str:
    return f' Their comment: "{comment}"' if comment else ""
