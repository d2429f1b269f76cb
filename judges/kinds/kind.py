"""A scale kind as a strategy: one object per kind (boolean, categorical, numeric) owns
everything that differs between them, so the rest of `judges` asks the scale's kind
(`kind_of`) instead of testing its name.

Each kind is bound to its scale (the categories, the range), so a caller looks it up
once and asks it: how a reply becomes a value (`bare`, `read`), how a value becomes a
score in [0, 1] and a pass at the cut (`placed`, `span`, `pass_cut`), which agreement
statistics apply (`statistics`, `primary`), how unsure the judge is where a label is
asked for (`label_margins`), and how a value is written for people, Langfuse and the
alignment's search (`show`, `stored`, `answer`). `pass_fail` says whether the judge is
the probability judge read at a calibrated threshold (`judges.pointwise`), the only one
with a LoRA step, a reward head and an injection check.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from infra.scales import ScoreScale
from judges.kinds.boolean import PassFail
from judges.kinds.categorical import Categorical
from judges.kinds.numeric import Numeric
from judges.kinds.text import Value
from judges.metrics import Metric


class ScaleKind(Protocol):
    """What judging on one kind of scale means, for its `scale`."""

    @property
    def scale(self) -> ScoreScale: ...

    @property
    def pass_fail(self) -> bool:
        """Whether the judge reads P(pass) at a threshold calibrated on the labels."""

    @property
    def answers(self) -> tuple[str, ...] | None:
        """The answers whose probabilities carry the verdict; None: it is read from text."""

    @property
    def question(self) -> str:
        """What the judge is asked, after the rubric and the exchange."""

    @property
    def primary(self) -> str:
        """The `agreement_report` key that decides between judges and that the gate compares."""

    @property
    def span(self) -> tuple[float, float] | None:
        """(worst, best) of the quantity a verdict is placed by; None: the scale has no order."""

    @property
    def score_name(self) -> str:
        """The name the judge's score in [0, 1] goes under in a score's metadata."""

    def bare(self, text: str) -> tuple[Any, str]:
        """(the raw verdict, the rationale) of a reply with no JSON and no "Verdict:" line;
        NoVerdict when it holds none."""

    def read(self, raw: Any) -> Value:
        """The raw verdict (a JSON value or a line's text) as a value on the scale;
        NoVerdict, with the reason, when it is not one."""

    def from_probabilities(self, probabilities: Mapping[str, float], threshold: float) -> Value:
        """The verdict the judge's normalized answer probabilities give (`threshold`:
        pass/fail's cut on P("Yes"))."""

    def on_scale(self, value: Any) -> Value | None:
        """A label's value as the judge compares it (bool, category, number); None: off it."""

    def agreed(self, values: Sequence[Value]) -> Value | None:
        """One value for several people's differing labels; None when no rule settles it."""

    def answer(self, value: Value) -> str:
        """The judge's answer that says `value`: what its probability is read for when a
        verdict is scored against a label, and what a LoRA record on it completes with."""

    def show(self, value: Value) -> str:
        """`value` as people read it, in reports, label requests and the reflection."""

    def stored(self, value: Value) -> Value:
        """A verdict as the trace source stores the score (Langfuse: a boolean as 1.0/0.0)."""

    def placed(self, value: Value, probabilities: Mapping[str, float]) -> float:
        """Where a verdict sits within `span` (the score is that position, normalized)."""

    def pass_cut(self, threshold: float) -> float:
        """The cut on the normalized score at which a verdict passes."""

    def cut(self, threshold: float) -> str:
        """Where the judge cuts, for people: "threshold 0.460" or "numeric 1 to 5 scale"."""

    def ranking_problem(self) -> str | None:
        """Why no reply is better than another on this scale, as one sentence with the
        fix; None when it ranks them."""

    def weights(self, values: Iterable[Value]) -> dict[Hashable, float]:
        """Balancing weights per answer over the labels' `values`, so a judge that always
        gives the majority answer does not win the search; empty: scored by distance."""

    def credit(
        self,
        value: Value,
        probabilities: Mapping[str, float],
        human: Value,
        weights: Mapping[Hashable, float],
    ) -> float:
        """The search's score of a verdict against the human's value: the (weighted)
        probability of the human's answer, or closeness on a numeric scale."""

    def agreement_value(self, value: Value) -> Value:
        """A verdict as the agreement statistics take it."""

    def check(self, values: Iterable[Any]) -> None:
        """ValueError naming the first value the statistics cannot take."""

    def statistics(self, pred: Sequence[Any], gold: Sequence[Any]) -> list[tuple[str, Metric]]:
        """(name, statistic) pairs that get a bootstrap interval, for these values."""

    def rates(self, pred: Sequence[Any], gold: Sequence[Any]) -> dict[str, float]:
        """Statistics reported without an interval (pass/fail: TPR, TNR), where defined."""

    def said(self, score: float, threshold: float, value: Value | None) -> Value | None:
        """The verdict the night's score stands for, from its `score` in [0, 1] or its
        `value` on the scale (None: unreadable); None when it says nothing."""

    def distance(self, score: float, threshold: float, margin: float) -> float:
        """How the disagreement table orders a verdict, largest first."""

    def label_margins(
        self, scores: Mapping[str, float], margins: Mapping[str, float], threshold: float
    ) -> Mapping[str, float]:
        """Per trace how sure the judge is, the smaller the less: where a label is asked
        for, from the night's `scores` in [0, 1] or its verdicts' own `margins`."""

    def unsure(self, score: float, margin: float, threshold: float, value: Value | None) -> str:
        """Why a label is asked for here, after "judge least sure: "."""


_BY_NAME: dict[str, Callable[[ScoreScale], ScaleKind]] = {
    "boolean": PassFail,
    "categorical": Categorical,
    "numeric": Numeric,
}


def kind_of(scale: ScoreScale) -> ScaleKind:
    """The strategy for `scale`'s kind, bound to it."""
    return _BY_NAME[scale.kind](scale)
