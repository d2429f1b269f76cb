"""The gate's check of the secondary criteria (`traces.criteria`): the primary must
improve (`flows.production.gate`), and no other criterion may fall beyond its
`max_drop`.

Each criterion is scored on the same held-out replies of both versions by its own judge,
so its gain is paired like the primary's, with the same bootstrap interval; the gate
decides on the point estimate, as it does for a slice. The criteria guard against a
clear regression: requiring the interval's low end above -max_drop would refuse any
candidate measured on few examples even where the criterion did not move, and the
interval is shown beside it. A criterion whose judge failed its own gate measures
nothing people agree with: it neither blocks nor passes, and the reason says so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from statistics import fmean

from judges.metrics import Estimate


@dataclass(frozen=True)
class CriterionEvidence:
    """One secondary criterion on the night's held-out replies, both versions."""

    name: str  # its annotation name
    candidate: dict[str, float] = field(default_factory=dict)  # example id -> score in [0, 1]
    production: dict[str, float] = field(default_factory=dict)
    trusted: bool = False  # its judge passed its own gate
    max_drop: float = 0.05  # `traces.criteria.<name>.max_drop`


@dataclass(frozen=True)
class CriterionVerdict:
    name: str
    examples: int  # scored for both versions
    production: float | None  # mean held-out score; None: no example scored for both
    candidate: float | None
    gain: Estimate | None
    trusted: bool
    max_drop: float

    @property
    def dropped(self) -> bool:
        """It fell beyond its tolerance, by a judge people can trust: the gate refuses."""
        return self.trusted and self.gain is not None and self.gain.value < -self.max_drop

    def line(self) -> str:
        """What was measured, for the gate's reason and the report."""
        if self.gain is None:
            return f"criterion {self.name}: no held-out example was scored for both"
        gain = self.gain
        shown = f" [{gain.low:+.3f}, {gain.high:+.3f}]" if gain.low is not None else ""
        said = (
            f"criterion {self.name} {self.production:.3f} -> {self.candidate:.3f} "
            f"({gain.value:+.3f}{shown} on {self.examples} examples)"
        )
        if not self.trusted:
            return said + ", by a judge that did not pass its gate: not checked"
        return said

    def sentence(self) -> str:
        """Why it refuses the candidate (when `dropped`)."""
        assert self.gain is not None
        return (
            f"criterion {self.name} fell {self.gain.value:+.3f}, beyond its "
            f"traces.criteria.{self.name}.max_drop {self.max_drop:.3f}"
        )


def criterion_verdicts(
    criteria: Sequence[CriterionEvidence], gain: Callable[[list[float], list[float]], Estimate]
) -> tuple[CriterionVerdict, ...]:
    """Each criterion's paired gain of the candidate over production, measured by `gain`
    (the gate's own `paired_gain`: the mean with its 95% bootstrap interval)."""
    verdicts = []
    for evidence in criteria:
        ids = sorted(set(evidence.candidate) & set(evidence.production))
        new = [evidence.candidate[i] for i in ids]
        old = [evidence.production[i] for i in ids]
        verdicts.append(
            CriterionVerdict(
                evidence.name,
                len(ids),
                fmean(old) if ids else None,
                fmean(new) if ids else None,
                gain(new, old) if ids else None,
                evidence.trusted,
                evidence.max_drop,
            )
        )
    return tuple(verdicts)
