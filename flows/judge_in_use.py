"""The judge the rest of a night runs on, once the gate has chosen it.

That is the night's aligned judge when it passed the gate (or when there was none to
keep), and otherwise the judge at alias judge-production, reloaded from the registry
with its stored threshold. Either way it is a registered version, so every score it
gives can name the version that gave it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class JudgeInUse:
    prompts: dict[str, str]
    threshold: float
    versions: dict[str, int]  # registered prompt name -> version
    heldout_kappa: float  # on tonight's held-out labels
    min_kappa: float
    is_new: bool  # tonight's aligned judge, not one kept from an earlier night

    @property
    def label(self) -> str:
        """How reports and score metadata name it, e.g. "agent-judge-rubric v3"."""
        return ", ".join(f"{name} v{version}" for name, version in sorted(self.versions.items()))

    @property
    def trusted(self) -> bool:
        """Whether it agrees with the humans enough to steer the agent."""
        return self.heldout_kappa >= self.min_kappa
