"""The judge as data: what it asks, on which scale it answers, where it cuts pass from
fail, which registered versions it is, and how well it agreed with the humans.

Alignment makes one, the registry stores and reloads one (`judges.versions`), the gate
compares two (`judges.gate`), and `metric` is the one way any stage turns one into
scores for an `LM`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from infra.lm import LM
from infra.scales import ScoreScale
from judges.agreement import primary_metric
from judges.kinds import PASS_CUT, ScaleKind, kind_of
from judges.pointwise import PointwiseJudge
from judges.scaled import ScaledJudge
from judges.scaled_metric import ScaledMetric
from judges.types import HeldoutVerdict


@dataclass(frozen=True)
class Judge:
    prompts: dict[str, str]  # component -> text (the rubric)
    scale: ScoreScale = ScoreScale("boolean")  # what it answers on: the humans' scale
    # The pass cut: calibrated on P(pass) for pass/fail, PASS_CUT on the normalized score
    # of any other scale.
    threshold: float = PASS_CUT
    versions: dict[str, int] = field(default_factory=dict)  # registered prompt -> version
    heldout: dict[str, float] = field(default_factory=dict)  # agreement on held-out labels
    # The folder of its LoRA adapter (`judges.judge_lora`; pass/fail only): the version
    # is rubric plus adapter. Served on demand beside the agent's (`judges.adapter`).
    adapter: str | None = None
    # The folder of its reward head (`judges.judge_head`; pass/fail only): P(pass) read
    # from the judge model's features, not its verdict; the version is rubric plus head.
    head: str | None = None
    # The newest label it learned from (a registered version's; the source's clock, as the
    # labels' own times): labels made after it are new to it, and watching its agreement
    # on them shows drift.
    made_at: datetime | None = None
    # Per held-out label, people's label beside its verdict, measured with `heldout`; ()
    # for a judge read back from the registry, or pickled before this field was kept.
    heldout_verdicts: tuple[HeldoutVerdict, ...] = ()

    def __post_init__(self) -> None:
        if self.head is not None and self.adapter is not None:
            raise ValueError(
                f"a judge reads a LoRA adapter's verdict or a reward head on the base model's "
                f"features, not both (adapter {self.adapter}, head {self.head})"
            )
        if self.head is not None and not self.kind.pass_fail:
            raise ValueError(f"a reward head judges pass/fail, not a {self.scale.describe()} scale")

    @property
    def kind(self) -> ScaleKind:
        """What differs by its scale's kind (`judges.kinds`), bound to its scale."""
        return kind_of(self.scale)

    @property
    def primary(self) -> str:
        """The agreement statistic that chooses and gates it, e.g. "kappa"."""
        return primary_metric(self.scale)

    @property
    def heldout_score(self) -> float:
        return self.heldout.get(self.primary, 0.0)

    @property
    def label(self) -> str:
        """How reports and score metadata name it, e.g. "agent-judge-rubric v3"."""
        return version_label(self.versions) or "an unregistered judge (the seed rubric)"

    @property
    def cut(self) -> str:
        """Where it cuts, for people: "threshold 0.460" or "numeric 1 to 5 scale"."""
        return self.kind.cut(self.threshold)

    def metric(self, lm: LM, rationale_max_tokens: int = 48) -> PointwiseJudge | ScaledMetric:
        """The judge as a metric of replies: a score in [0, 1] (P(pass) for pass/fail,
        from its head when it has one, else its verdict placed on the scale's order), a
        pass at `threshold`, and a one-sentence rationale on demand (always generated)."""
        if self.kind.pass_fail:
            return PointwiseJudge(
                lm,
                self.prompts,
                self.threshold,
                rationale_max_tokens,
                adapter=self.adapter,
                head=self.head,
            )
        return ScaledMetric(ScaledJudge(lm, self.prompts, self.scale), rationale_max_tokens)


def version_label(versions: dict[str, int]) -> str:
    return ", ".join(f"{name} v{version}" for name, version in sorted(versions.items()))
