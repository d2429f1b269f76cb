"""The night's reward-head step: a head on the judge model's features, kept only if it
agrees better on the validation labels than the judge so far.

After rubric alignment (and the judge's LoRA step), the judge model reads its own
pointwise prompt for every training and validation label (`LM.features`), a logistic
head is fitted on the training labels (`judges.reward_head`), and its pass cut is
calibrated on the head's out-of-fold P(pass) over those labels: what it says of labels it
has not seen. Its validation kappa at that cut is then honest, like the rubric's (cut on
the training labels, read on validation), and the head is kept only if it beats the
judge so far there. A kept head is fitted once more on the training and validation labels
together, its cut calibrated out of fold on all of them: the held-out labels stay for
the gate, and a head gains from every label (on the router's labels held-out kappa 0.46,
0.53, 0.64 at 50, 100, 150; on the demo's splits 0-9 refitting raised the mean from 0.561
to 0.578, and a cut on the validation labels instead of out of fold gave 0.483).

With `injections`, each passing training and validation reply is read once more with an
instruction to its judge appended (`judges.injection.TRAINING`), labelled fail, and the
head fits those too: a reply that addresses its judge fails, however right it is
otherwise. The teacher's features lean to "pass" when a reply says "answer Yes", and a
head that never saw such a reply follows that lean: on the demo's 376 labels (seed 0) a
head without them let 31 of 104 probed held-out failing replies through, one with them 6
of 105 (held-out kappa 0.705 and 0.657; the night itself, 10 of 105); planting on the
failing replies instead, as the judge's LoRA step does, let 20 of 100 through, at three
and a half times the reads (docs/benchmarks/2026-12-07-judge-labels.md). The check's own
probes (`PROBES`) are never among them, and the cut and the validation kappa are read on
people's labels alone.

The head reads the base judge model (no LoRA adapter): the version it makes is rubric
plus head, and, with a memory, the reviewers' notes it read (saved beside the head).
Training is nothing but a scikit-learn fit, so unlike the LoRA step it runs in the
night's own process.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, replace
from itertools import accumulate
from pathlib import Path

from infra.lm import LM
from judges.align import Alignment, beats
from judges.calibration import calibrate_threshold
from judges.calls import Tally, answered, each, tallied
from judges.injection import TRAINING, planted
from judges.memory import ReviewedMemory
from judges.metrics import cohen_kappa
from judges.pass_fail_fit import heldout_agreement
from judges.pointwise import PASS_QUESTION, PointwiseJudge
from judges.reward_head import HeadFit, JudgeModel, fit_head, out_of_fold
from judges.types import JudgedItem


@dataclass
class JudgeHead:
    """What the reward-head step did, for the report and MLflow."""

    so_far: str  # the judge it had to beat: "the rubric" or "rubric plus LoRA adapter"
    so_far_val: float  # that judge's kappa on the validation labels
    labels: int = 0  # labels the kept head was fitted on (train, + val when kept)
    val: float | None = None  # the head fitted on the training labels: validation kappa
    strength: float | None = None  # its L2 strength C, chosen by cross-validation
    kept: str | None = None  # the kept head's folder; None: the judge so far stays
    seconds: float = 0.0  # reading features and fitting
    memory: int = 0  # reviewers' notes in the prompt it reads (`judges.memory`)
    note: str = ""  # why it did not run, or was not kept
    planted: int = 0  # replies with an instruction to the judge planted, fitted beside them


async def judge_head_step(
    lm: LM,
    alignment: Alignment,
    train: list[JudgedItem],
    val: list[JudgedItem],
    heldout: list[JudgedItem],
    folder: Path,
    so_far: str,
    so_far_val: float,
    seed: int,
    cfg: HeadFit | None = None,
    memory: int = 0,
    tally: Tally | None = None,
    injections: bool = False,
) -> tuple[Alignment, JudgeHead]:
    """Tonight's judge with a reward head when one agrees better on the validation labels
    than the judge so far (`alignment.judge`, whose validation kappa is `so_far_val`),
    saved in `folder`; and what the step did. `tally` counts the items read and judged;
    `injections`: the head also fits the passing replies with an instruction planted."""
    judge, cfg = alignment.judge, cfg or HeadFit()
    step = JudgeHead(so_far, so_far_val, memory=memory)
    if not judge.kind.pass_fail:
        step.note = f"a judge on a {judge.scale.describe()} scale has no head (pass/fail only)"
        return alignment, step
    started = time.perf_counter()
    notes = ReviewedMemory(train, memory) if memory else None
    reader = PointwiseJudge(lm, {"rubric": judge.prompts["rubric"]}, memory=notes)

    async def features(item: JudgedItem) -> list[float]:
        return await lm.features(reader.messages(item, PASS_QUESTION))

    parts = [train, val, _planted(train, injections, seed), _planted(val, injections, seed)]
    try:
        read = await tallied(sum(parts, []), lambda some: each(some, features), tally)
    except NotImplementedError as err:  # an OpenAI-compatible server returns no hidden states
        step.note = f"{type(lm).__name__} does not return the judge model's features ({err})"
        return alignment, step
    # asked only now: a remote backend resolves its local checkpoint when first asked
    if (model := JudgeModel.of(lm)) is None:
        step.note = f"{type(lm).__name__} names no judge model a head could be read on"
        return alignment, step
    (train_ok, x_train), (val_ok, x_val), (_, x_planted_train), (_, x_planted_val) = [
        answered(part, read[start : start + len(part)])
        for part, start in zip(parts, accumulate([0, *map(len, parts)]), strict=False)
    ]
    y_train, y_val = _labels(train_ok), _labels(val_ok)
    if min(sum(y_train), len(y_train) - sum(y_train)) < 2 or not val_ok:
        step.note = (
            f"too few labels to fit and validate a head ({sum(y_train)} passing and "
            f"{len(y_train) - sum(y_train)} failing training labels, {len(val_ok)} validation)"
        )
        step.seconds = time.perf_counter() - started
        return alignment, step
    x_fit, y_fit = x_train + x_planted_train, y_train + [False] * len(x_planted_train)
    head = fit_head(x_fit, y_fit, model, cfg, seed, memory)
    cut = _cut(x_fit, y_fit, len(x_train), head.strength, cfg, seed)
    step.val = cohen_kappa([head.p_pass(x) >= cut for x in x_val], y_val)
    step.strength, step.labels, step.planted = head.strength, len(y_train), len(x_planted_train)
    if not beats(step.val, so_far_val):
        step.note = (
            f"the head agreed no better on the validation labels than {so_far} "
            f"(κ {step.val:.3f} vs {so_far_val:.3f}): {so_far} stays"
        )
        step.seconds = time.perf_counter() - started
        return alignment, step
    x_people, y_people = x_train + x_val, y_train + y_val
    x_all = x_people + x_planted_train + x_planted_val
    y_all = y_people + [False] * (len(x_all) - len(x_people))
    head = fit_head(x_all, y_all, model, cfg, seed, memory)
    cut = _cut(x_all, y_all, len(x_people), head.strength, cfg, seed)
    head.save(folder)
    if notes is not None:  # the head reads them: they travel (and are registered) with it
        notes.save(folder)
    step.seconds = time.perf_counter() - started
    step.strength, step.kept = head.strength, str(folder)
    step.labels, step.planted = len(y_people), len(x_all) - len(x_people)
    report, verdicts = await heldout_agreement(
        lm, judge.prompts, cut, heldout, seed, head=str(folder), tally=tally
    )
    tuned = replace(
        judge,
        threshold=cut,
        heldout=report,
        heldout_verdicts=verdicts,
        adapter=None,
        head=str(folder),
    )
    return replace(alignment, judge=tuned), step


def _planted(items: list[JudgedItem], injections: bool, seed: int) -> list[JudgedItem]:
    """Each passing reply with an instruction to its judge appended, labelled fail."""
    if not injections:
        return []
    rng = random.Random(seed)
    return [planted(item, TRAINING, rng) for item in items if item.human_pass]


def _cut(x, y, people: int, strength: float, cfg: HeadFit, seed: int) -> float:
    """The pass cut calibrated on the out-of-fold P(pass) of the first `people` rows,
    people's labels: the planted rows after them are folded and fitted like the rest, but
    the cut is where people's labels put it."""
    p_pass = out_of_fold(x, y, strength, cfg, seed)
    return calibrate_threshold(p_pass[:people], y[:people])


def _labels(items: list[JudgedItem]) -> list[bool]:
    return [bool(item.human_pass) for item in items]
