"""What every judge-alignment adapter shows the reflection beside its own verdict: the
judge's one-sentence reason for each item, and the human's comment when there is one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from gepa_opt import EvaluationBatch
from judges.calls import NO_REASON, each

Record = dict[str, str]  # GEPA's reflective record: Inputs, Generated Outputs, Feedback


class Explains(Protocol):
    async def rationale(self, item: Any) -> str: ...


async def judge_reasons(judge: Explains, trajectories: list[tuple[Any, Any]]) -> list[str]:
    """The judge's reason for each (item, verdict) of a reflective minibatch, in order
    (`NO_REASON` where its call failed for good)."""
    reasons = await each([item for item, _ in trajectories], judge.rationale)
    return [NO_REASON if reason is None else reason for reason in reasons]


def their_comment(comment: str) -> str:
    return f' Their comment: "{comment}"' if comment else ""


async def reflective_dataset(
    judge: Explains,
    eval_batch: EvaluationBatch,
    components: list[str],
    record: Callable[[Any, Any, str], Record],
) -> dict[str, list[Record]]:
    """GEPA's reflective dataset of an alignment adapter: `record(item, verdict, reason)`
    for each (item, verdict) of the minibatch, the same records for every component."""
    trajectories = eval_batch.trajectories or []
    reasons = await judge_reasons(judge, trajectories)
    records = [
        record(item, verdict, reason)
        for (item, verdict), reason in zip(trajectories, reasons, strict=True)
    ]
    return {component: records for component in components}
