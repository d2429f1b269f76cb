"""Candidate against production, reply against reply: the pairwise judge in the gate.

Where no true label scores the held-out examples, the gate otherwise compares two means
of one pointwise judge's scores, each reply read alone. A pairwise judge reads the
candidate's and production's replies to the same request side by side, in both orders
(`judges.pairwise`), which is how people compare versions. The evidence is the
candidate's win rate (a win 1, a loss 0, identical replies and exact ties 0.5, not asked)
with a bootstrap interval over examples, and the position-flip rate: the share of pairs
whose two orders, after the judge's constant lean towards the first answer is taken off,
still pick different replies. A judge that flips often is swayed by order more than by
the replies, and its win rate cannot be trusted (`promotion.max_position_flips`).

Every pair is asked in both orders and read as their average, so which reply is called
"A" does not matter: swapping them turns each verdict into its mirror image, and the
decision is the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import fmean

from judges.metrics import bootstrap
from judges.pairwise import PairwiseJudge, PairwiseVerdict, position_lean
from judges.types import PairwiseItem


@dataclass(frozen=True)
class PairwiseEvidence:
    n: int  # held-out examples both versions replied to
    win_rate: float  # the candidate's, identical replies and exact ties counted 0.5
    low: float | None  # its 95% bootstrap interval over examples
    high: float | None
    flip_rate: float  # of the pairs asked: the two orders disagree
    asked: int  # pairs the judge read (identical replies are not asked)

    def line(self) -> str:
        shown = "" if self.low is None else f" [{self.low:.3f}, {self.high:.3f}]"
        return (
            f"pairwise win rate {self.win_rate:.3f}{shown} on {self.n} examples "
            f"({self.asked} compared, position flips {self.flip_rate:.0%})"
        )


async def compare_replies(
    judge: PairwiseJudge,
    requests: dict[str, str],
    candidate: dict[str, str],
    production: dict[str, str],
    resamples: int = 2000,
    seed: int = 0,
    candidate_as: str = "A",
) -> PairwiseEvidence:
    """The candidate's win rate over production on the examples both replied to, the
    candidate called answer `candidate_as` ("A" or "B"; both orders are asked either way,
    so the evidence is the same)."""
    ids = sorted(set(candidate) & set(production) & set(requests))
    differ = [i for i in ids if candidate[i].strip() != production[i].strip()]
    first, second = (candidate, production) if candidate_as == "A" else (production, candidate)
    items = [PairwiseItem(i, i, requests[i], first[i], second[i], None) for i in differ]
    verdicts = await judge.verdicts(items)
    lean = position_lean(verdicts)  # the judge's constant pull to the first answer
    leaned = {i: v.leaned(lean, 0.5) for i, v in zip(differ, verdicts, strict=True)}
    wins = [_win(leaned[i], candidate_as) if i in leaned else 0.5 for i in ids]
    flips = [v.order_flip for v in leaned.values()]
    if not wins:
        return PairwiseEvidence(0, 0.5, None, None, 0.0, 0)
    interval = bootstrap(lambda w, _: fmean(w), wins, wins, resamples=resamples, seed=seed)
    flip_rate = fmean(flips) if flips else 0.0
    return PairwiseEvidence(
        len(ids), fmean(wins), interval.low, interval.high, flip_rate, len(items)
    )


def _win(verdict: PairwiseVerdict, candidate_as: str) -> float:
    """1 where the candidate is judged better, 0 where worse, 0.5 for a tie."""
    p_candidate = verdict.p_a if candidate_as == "A" else 1.0 - verdict.p_a
    return 0.5 if p_candidate == 0.5 else float(p_candidate > 0.5)
