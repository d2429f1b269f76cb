"""The night's held-out evaluations sent back to the trace source as a dataset and its
runs (`infra.traces.heldout_runs`): where Langfuse users compare versions, beside the
MLflow evaluation runs (`flows.night.evaluation_runs`) holding the same scores.

Items are the held-out examples the night scored; each evaluated version is one run,
named for the version and the night, since the same version is evaluated again on later
nights. Sent after registration, and like the feedback stage it may not cost the night:
a failure is caught, logged, and reported in one sentence.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field

from flows.night.stages import Evaluation
from infra.traces.heldout_runs import HeldoutItem, HeldoutRun, SentRuns
from infra.types import Example

log = logging.getLogger(__name__)

ROLES = {"seed": "production", "candidate": "candidate"}  # evaluation label -> what it is


@dataclass
class HeldoutDataset:
    dataset: str  # "" when not sent (see note)
    items: int = 0
    runs: dict[str, int] = field(default_factory=dict)  # run name -> its run items
    link: str = ""  # the dataset's page, where the source has one
    note: str = ""  # why nothing was sent

    def lines(self) -> list[str]:
        """One sentence for the night's report."""
        if not self.runs:
            return [f"Held-out dataset runs: none; {self.note}."]
        runs = "; ".join(f"{name!r} ({n} items)" for name, n in self.runs.items())
        return [f"Held-out dataset runs in {self.dataset!r} ({self.items} items): {runs}."]


def run_names(
    evals: Collection[str], model: str, versions: dict[str, int | None], run_id: str
) -> dict[str, str]:
    """Evaluation label -> its run's name: the version it evaluated, its role, the night."""
    names = {}
    for label in evals:
        version = versions.get(label)
        what = f"{model} v{version}" if version else "the seed prompts"
        names[label] = f"{what} ({ROLES.get(label, label)}), night {run_id}"
    return names


def heldout_items(
    examples: list[Example], evals: dict[str, Evaluation], traces: Collection[str]
) -> list[HeldoutItem]:
    """The examples some version was scored on, each with the production trace it was
    held out from when it is one of `traces` (the night's held-out slice)."""
    scored = {i for evaluation in evals.values() for i in evaluation.scores}
    return [
        HeldoutItem(e.id, e.inputs, e.reference, e.id if e.id in traces else None)
        for e in examples
        if e.id in scored
    ]


def heldout_runs(evals: dict[str, Evaluation], names: dict[str, str]) -> list[HeldoutRun]:
    return [
        HeldoutRun(names[label], dict(evaluation.outputs), dict(evaluation.scores))
        for label, evaluation in evals.items()
    ]


async def send_heldout_dataset(
    dataset: str,
    items: list[HeldoutItem],
    runs: list[HeldoutRun],
    send: Callable[[list[HeldoutItem], list[HeldoutRun]], Awaitable[SentRuns]],
) -> HeldoutDataset:
    """What `send` stored, for the report; a failure is logged and said, never raised."""
    if not dataset:
        return HeldoutDataset("", note="traces.heldout_dataset is empty")
    if not items:
        return HeldoutDataset(dataset, note="the night scored no held-out examples")
    try:
        sent = await send(items, runs)
    except Exception as err:
        log.error("the held-out dataset runs failed; the night stays registered: %s", err)
        return HeldoutDataset(dataset, note=f"sending them failed ({type(err).__name__}: {err})")
    return HeldoutDataset(sent.dataset, sent.items, sent.runs, sent.link)
