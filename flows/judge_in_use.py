"""The judge the rest of a night runs on, once the gate has chosen it.

That is the night's aligned judge when it passed the gate (or when there was none to
keep), and otherwise the judge at alias judge-production, reloaded from the registry
with its stored threshold. Either way it is a registered version, so every score it
gives can name the version that gave it.
"""

from __future__ import annotations

from dataclasses import dataclass

from judges.scaled_align import primary_metric
from judges.scales import ScoreScale


@dataclass(frozen=True)
class JudgeInUse:
    prompts: dict[str, str]
    threshold: float  # the pass cut (see `flows.stages.JudgeStage.threshold`)
    versions: dict[str, int]  # registered prompt name -> version
    heldout_score: float  # the primary agreement statistic on tonight's held-out labels
    floor: float  # judge.min_kappa
    is_new: bool  # tonight's aligned judge, not one kept from an earlier night
    scale: ScoreScale = ScoreScale("boolean")

    @property
    def label(self) -> str:
        """How reports and score metadata name it, e.g. "agent-judge-rubric v3"."""
        return version_label(self.versions)

    @property
    def primary(self) -> str:
        return primary_metric(self.scale)

    @property
    def trusted(self) -> bool:
        """Whether it agrees with the humans enough to steer the agent."""
        return self.heldout_score >= self.floor


def version_label(versions: dict[str, int]) -> str:
    return ", ".join(f"{name} v{version}" for name, version in sorted(versions.items()))
