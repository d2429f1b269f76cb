"""Aligning a judge's prompt to the humans with gepa_opt: one pipeline for every scale.

GEPA searches the rubric (train = reflective feedback, val = Pareto set). Its best must
then beat the seed on the scale's primary agreement statistic over the validation
labels, each fitted on the training labels, and reach `floor` there, or the seed stays:
the search metric is only a surrogate, and a small reflection model can propose rubrics
that game it. Below the floor, beating the seed is a choice between two judges that
agree with people at chance, and the team's own rubric is the better start (on the
demo's 135M model a night replaced the router's rubric, val kappa -0.138, with one
about editing instructions, -0.005).
Held-out labels are only ever reported, never used to choose. What differs by scale
(the search metric, the fit, the agreement) is a `ScaleFit`.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from gepa_opt import Adapter, GEPAConfig, PoolEntry, RejectReason, optimize
from infra.lm import LM
from infra.scales import ScoreScale
from judges.calls import Tally
from judges.judge import Judge
from judges.kinds import PASS_CUT, kind_of
from judges.pass_fail_fit import PassFailFit
from judges.scaled_fit import ScaledFit
from judges.types import HeldoutVerdict, JudgedItem


class ScaleFit(Protocol):
    """How a judge on one kind of scale is searched, fitted and measured."""

    @property
    def primary(self) -> str: ...

    def check(self, items: list[JudgedItem]) -> None:
        """Raise, naming the items, when a label is missing or off the scale."""

    def adapter(self, lm: LM, labelled: list[JudgedItem]) -> Adapter:
        """GEPA's adapter, weighted on `labelled`; counts `unparseable` verdicts."""

    async def fit(
        self,
        lm: LM,
        prompts: dict[str, str],
        train: list[JudgedItem],
        val: list[JudgedItem],
        seed: int,
    ) -> tuple[float, float]:
        """(threshold fitted on train, the primary statistic on val at it)."""

    async def agreement(
        self,
        lm: LM,
        prompts: dict[str, str],
        threshold: float,
        items: list[JudgedItem],
        seed: int,
        adapter: str | None = None,
        head: str | None = None,
        tally: Tally | None = None,
    ) -> tuple[dict[str, float], tuple[HeldoutVerdict, ...]]:
        """`agreement_report` of the judge on `items`, read with its LoRA `adapter` or its
        reward `head` (folders; pass/fail judges only), and each judged item's label
        beside its verdict (`Judge.heldout_verdicts`); `tally` counts the items judged."""


def fit_for(scale: ScoreScale) -> ScaleFit:
    """Pass/fail: a threshold calibrated on P(pass); any other scale: the judge answers on it."""
    return PassFailFit() if kind_of(scale).pass_fail else ScaledFit(scale)


@dataclass
class Alignment:
    """What aligning found: the judge to use and the seed, both measured on held-out labels."""

    judge: Judge  # GEPA's best, or the seed if that did not agree better on val
    seed: Judge
    val_score: float  # the primary statistic of GEPA's best on validation labels
    seed_val_score: float
    kept_seed: bool  # GEPA's best did not agree better on validation labels, or not at `floor`
    searched: dict[str, str]  # GEPA's best candidate, kept or not
    metric_calls: int
    sizes: dict[str, int]  # labels per split: train, val, heldout
    unparseable: int = 0  # verdicts the search scored 0, unreadable
    refused: int = 0  # proposals refused unevaluated: they restated the meta-prompt
    curve: list[tuple[int, float]] = field(default_factory=list)  # (metric calls, best val)
    floor: float = -math.inf  # the validation agreement a rubric needs to replace the seed
    # GEPA's pool: each candidate's parents, validation score and when it was found (a
    # tuple: its class default is what a result pickled before this field reads)
    pool: tuple[PoolEntry, ...] = ()
    # why nothing was searched or fitted (too few labels), a sentence for the night's report
    skipped: str = ""

    @property
    def primary(self) -> str:
        return self.judge.primary

    @property
    def below_floor(self) -> bool:
        """GEPA's best beat the seed on validation labels but not up to `floor`."""
        return beats(self.val_score, self.seed_val_score) and self.val_score < self.floor

    @property
    def judge_val_score(self) -> float:
        """The chosen rubric's primary statistic on the validation labels."""
        return self.seed_val_score if self.kept_seed else self.val_score


def beats(score: float, other: float) -> bool:
    """A NaN (undefined or missing) statistic never wins, and loses to any number."""
    return not math.isnan(score) and (math.isnan(other) or score > other)


async def align(
    lm: LM,
    seed_prompts: dict[str, str],
    scale: ScoreScale,
    train: list[JudgedItem],
    val: list[JudgedItem],
    heldout: list[JudgedItem],
    config: GEPAConfig | None,
    reflection_lm: Callable[[str], Awaitable[str]] | None,
    on_event: Callable[[Any], None] | None = None,
    floor: float = -math.inf,
    seed: int = 0,
) -> Alignment:
    """GEPA on the rubric under `config`, then the seed and the best fitted and measured;
    `config` None searches nothing: the seed rubric is fitted and measured alone, and
    nothing reflects (`reflection_lm` may be None)."""
    fit = fit_for(scale)
    fit.check(train + val + heldout)  # before any budget is spent
    if not train or not val:
        return await _unfitted(lm, seed_prompts, scale, train, val, heldout, floor, seed)
    adapter = fit.adapter(lm, train + val)
    best, used, refused, pool = dict(seed_prompts), 0, 0, ()
    if config is not None:
        if reflection_lm is None:
            raise ValueError("a GEPA search of the rubric needs a reflection model")
        seed = config.seed
        result = await optimize(
            seed_prompts,
            train,
            val,
            adapter,
            reflection_lm,
            config,
            example_id=lambda item: item.id,
            on_event=on_event,
        )
        best, used = dict(result.best_candidate), result.metric_calls_used
        refused = result.rejections.get(RejectReason.REFUSED, 0)
        pool = result.pool()
    seed_fitted = fit.fit(lm, seed_prompts, train, val, seed)
    if best == seed_prompts:  # one reading of the judge, not two of the same prompts
        (seed_cut, seed_val) = (best_cut, best_val) = await seed_fitted
    else:
        (seed_cut, seed_val), (best_cut, best_val) = await asyncio.gather(
            seed_fitted, fit.fit(lm, best, train, val, seed)
        )
    kept_seed = best != seed_prompts and not (beats(best_val, seed_val) and best_val >= floor)
    chosen, cut = (seed_prompts, seed_cut) if kept_seed else (best, best_cut)
    seed_measured = fit.agreement(lm, seed_prompts, seed_cut, heldout, seed)
    if chosen == seed_prompts:
        (seed_report, seed_verdicts) = (chosen_report, chosen_verdicts) = await seed_measured
    else:
        (seed_report, seed_verdicts), (chosen_report, chosen_verdicts) = await asyncio.gather(
            seed_measured, fit.agreement(lm, chosen, cut, heldout, seed)
        )
    return Alignment(
        judge=Judge(
            dict(chosen), scale, cut, heldout=chosen_report, heldout_verdicts=chosen_verdicts
        ),
        seed=Judge(
            dict(seed_prompts), scale, seed_cut, heldout=seed_report, heldout_verdicts=seed_verdicts
        ),
        val_score=best_val,
        seed_val_score=seed_val,
        kept_seed=kept_seed,
        searched=best,
        metric_calls=used,
        sizes={"train": len(train), "val": len(val), "heldout": len(heldout)},
        unparseable=adapter.unparseable,
        refused=refused,
        floor=floor,
        pool=pool,
    )


async def _unfitted(
    lm: LM,
    seed_prompts: dict[str, str],
    scale: ScoreScale,
    train: list[JudgedItem],
    val: list[JudgedItem],
    heldout: list[JudgedItem],
    floor: float,
    seed: int,
) -> Alignment:
    """The seed rubric at the scale's default cut, measured on the held-out labels if there
    are any: with no labels to fit on or none to validate on (a quiet week, a label window
    that left none, a new project), a fit or a kappa would raise on the empty side, and a
    night without labels still has traces to run on."""
    sizes = {"train": len(train), "val": len(val), "heldout": len(heldout)}
    report, verdicts = {}, ()
    if heldout:
        report, verdicts = await fit_for(scale).agreement(lm, seed_prompts, PASS_CUT, heldout, seed)
    judge = Judge(dict(seed_prompts), scale, PASS_CUT, heldout=report, heldout_verdicts=verdicts)
    labels = sum(sizes.values())
    why = (
        f"Judge alignment skipped: {labels} labels ({sizes['train']} to fit on, "
        f"{sizes['val']} to validate on) are too few to align the judge, so the seed rubric "
        f"runs unfitted at the default cut {PASS_CUT:.2f}"
    )
    return Alignment(
        judge=judge,
        seed=judge,
        val_score=math.nan,
        seed_val_score=math.nan,
        kept_seed=False,
        searched=dict(seed_prompts),
        metric_calls=0,
        sizes=sizes,
        floor=floor,
        skipped=why,
    )
