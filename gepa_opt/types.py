"""The contract between the optimizer and the system it optimizes.

The engine only ever sees candidates (named texts), scores and opaque outputs/traces;
everything task-specific lives behind `Adapter`, so the same loop optimizes an agent's
prompts or a judge's rubric.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

Candidate = dict[str, str]
"""Component name -> text (a prompt, a rubric)."""

ExampleId = Hashable
"""Identifies an example within its split; the evaluation cache and Pareto fronts key on it."""

ReflectionLM = Callable[[str], Awaitable[str]]
"""Prompt in, text out. A `None` reply (e.g. a refusal) is treated as an empty proposal."""

DataInst = TypeVar("DataInst", contravariant=True)


class CallFailed(Exception):
    """Raised by `Adapter.evaluate` or a `ReflectionLM` for a call that failed for good
    (its client's own retries spent, or a reply that cannot be read). The engine tries
    the example again (`GEPAConfig.call_attempts`), never scores it, charges no budget
    for it, and counts it (`GEPAResult.failed_calls`); any other exception ends the run."""


@dataclass
class EvaluationBatch:
    """One candidate run on a list of examples, aligned with that list."""

    outputs: list[Any]
    scores: list[float]
    """Per example, higher is better."""
    trajectories: list[Any] | None = None
    """Per example; required when evaluated with `capture_traces=True`."""
    objective_scores: list[dict[str, float]] | None = None
    """Per example, named objective -> score, higher is better (e.g. {"accuracy": 1.0,
    "brevity": 0.4}). Optional; `GEPAConfig.frontier` "objectives" or "both" needs the
    same names for every val example."""


class Adapter(Protocol[DataInst]):
    """Runs the system under optimization; the only task-specific seam of the engine.

    An adapter of a program with several modules may also offer
    `async blame(candidate, eval_batch) -> dict[str, float]`: how much of the batch's
    failure the feedback puts on each component (`module_selection = "blamed"`).
    Any adapter may offer `refuses(component, text, current) -> str | None`: why a
    proposed text (rewriting `current`) must not become a candidate (None: it may),
    checked before any metric call is spent.
    """

    async def evaluate(
        self, batch: list[DataInst], candidate: Candidate, capture_traces: bool = False
    ) -> EvaluationBatch:
        """Run `candidate` on every example of `batch` (free to parallelize internally)."""
        ...

    async def make_reflective_dataset(
        self, candidate: Candidate, eval_batch: EvaluationBatch, components_to_update: list[str]
    ) -> dict[str, list[dict[str, Any]]]:
        """Per component, the records its reflection reads.

        Typically {"Inputs": ..., "Generated Outputs": ..., "Feedback": ...} per example.
        """
        ...


def candidate_digest(candidate: Candidate) -> str:
    """Content address of a candidate: equal texts share cache entries and pool slots."""
    canonical = json.dumps(candidate, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()
