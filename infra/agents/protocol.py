"""What an agent must offer the flywheel, and nothing more.

Nothing in gepa_opt, judges or weights knows which agent it is: they see prompt
components (a `Candidate`), examples and rollouts.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from infra.lm import LM
from infra.traces.types import TraceRecord
from infra.types import Example, Rollout


@runtime_checkable
class Agent(Protocol):
    name: str

    def seed_prompts(self) -> dict[str, str]:
        """The prompt components in production when no registry version exists yet."""
        ...

    def example_from_trace(self, trace: TraceRecord) -> Example:
        """The task instance a production trace recorded (raises RecordError if unusable)."""
        ...

    async def run(self, example: Example, prompts: dict[str, str], lm: LM, **params) -> Rollout:
        """Run the agent once; `params` go to the LM (temperature, adapter, max_tokens)."""
        ...

    def reference_score(self, example: Example, output: str) -> float | None:
        """The true score against `example.reference`, or None when the agent has none.

        Used only on the held-out split, to measure what really improved.
        """
        ...
