"""What an agent must offer the flywheel, and nothing more.

Nothing in gepa_opt, judges or weights knows which agent it is: they see prompt
components (a `Candidate`), examples and rollouts. What an agent may offer besides
(`Demonstrating`, `runs_offline`, `judge_rubric`) is read and checked in
`infra.agents.contract`; an agent without it is unchanged.
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


class TargetScoring(Protocol):
    """An agent that can tell whether a reply says what a right reply says (optional):
    where people corrected or passed a trace, the night's prompt search scores the agent
    against that right reply instead of asking the judge (`judges.labelled_metric`)."""

    def target_score(self, reply: str, target: str) -> float | None:
        """`reply`'s score in [0, 1] against the right reply `target`; None where
        `target` is no answer this agent can compare with (the judge then decides)."""
        ...


class Demonstrating(Protocol):
    """An agent whose prompt shows few-shot demonstrations (optional): the night draws
    them from its labelled traces, each with the reply it should have given, and GEPA
    swaps, adds and drops them by the evidence (`gepa_opt.Demonstrations`)."""

    demonstrations: str | None
    """The seed prompt component that holds the demonstrations, one per line (None or
    absent: it shows none)."""

    def demonstration(self, example: Example, reply: str) -> str | None:
        """The one line that shows `reply` as the answer to `example`, as the component
        holds it; None where it cannot be one (a reply that is no answer of this agent's)."""
        ...
