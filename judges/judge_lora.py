"""The judge's slow loop: a LoRA adapter on the human labels, kept only if it agrees better.

Prompt alignment cannot make a 135M judge agree with people (held-out kappa near 0.1 for
any rubric); its weights can learn what no prompt says. The adapter trains on the
training labels as verdict tokens on the judge's own prompt (`judges.lora_records`), is
read at each saved checkpoint on the validation labels (early stopping, read after the
run), and the best checkpoint is kept only if it agrees better on validation than the
rubric alone.

Its threshold is calibrated on the training and validation labels together: the adapter
has fitted the training labels, so their P(pass) alone sits near 0 and 1 and leaves the
cut anywhere in between (on the demo's splits 0-2 the kept checkpoints read held-out
kappa 0.336, 0.393, 0.318 at a cut on the training labels; 0.507, 0.393, 0.336 on both).

With a memory (`judges.memory`), the judge's prompt also holds the reviewers' notes on
the training labels most like the exchange, and the adapter trains and is read on that
prompt: the notes say what the request alone does not (on the demo, which kind was
right), and the adapter learns to compare the reply with them. Held-out labels are only
measured, never chosen on: the gate (`judges.choose`) reads them. Training is the
caller's (`weights.lora`, composed by `flows`): judges do not train models.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from infra.lm import LM
from judges.align import Alignment, beats
from judges.calls import Done
from judges.lora_records import Record, pointwise_records
from judges.memory import ReviewedMemory
from judges.pass_fail_fit import fit_and_validate, heldout_agreement
from judges.pointwise import PASS_QUESTION, PointwiseJudge
from judges.types import JudgedItem

# records -> the adapter folders training saved, in order (the last is the end)
TrainAdapter = Callable[[list[Record]], Awaitable[Sequence[Path]]]


@dataclass
class JudgeLora:
    """What the judge's LoRA step did, for the report and MLflow."""

    records: int  # training records (balanced, planted injections included)
    rubric_val: float  # the rubric alone: kappa on the validation labels
    checkpoints: dict[str, float] = field(default_factory=dict)  # folder name -> val kappa
    kept: str | None = None  # the kept adapter's folder; None: the rubric stays alone
    seconds: float = 0.0  # training
    memory: int = 0  # reviewers' notes in the judge's prompt per exchange (`judges.memory`)
    note: str = ""  # why it did not run, or was not kept
    heldout: dict[str, float] = field(default_factory=dict)  # the kept judge's, as measured
    # How training went, for its run in MLflow (the caller's to fill: judges do not
    # train): per optimizer step what the trainer logged, the steps, where it trained.
    # Plain defaults, so that a result persisted before them still loads.
    history: tuple[dict[str, float], ...] = ()
    train_steps: int = 0
    device: str = ""

    @property
    def best_val(self) -> float | None:
        return max(self.checkpoints.values(), default=None)

    @property
    def kept_val(self) -> float | None:
        """The kept checkpoint's validation kappa (None: none was kept)."""
        return None if self.kept is None else self.checkpoints[Path(self.kept).name]


async def judge_lora_step(
    lm: LM,
    alignment: Alignment,
    train: list[JudgedItem],
    val: list[JudgedItem],
    heldout: list[JudgedItem],
    train_adapter: TrainAdapter,
    seed: int,
    injections: bool = True,
    comments: bool = False,
    memory: int = 0,
    mismatched: bool = False,
    done: Done | None = None,
) -> tuple[Alignment, JudgeLora]:
    """Tonight's aligned judge with its LoRA adapter when one agrees better on validation
    labels (the alignment, its judge replaced), and what the step did. `memory`: the notes
    on alike training labels the judge reads per exchange (0: none); they are saved in
    every checkpoint's folder, so the adapter is never read without them. `mismatched`:
    also train on passing replies under unlike requests, labelled fail. `done(1)` as each
    saved adapter has been read on the validation labels."""
    judge, rubric_val = alignment.judge, alignment.judge_val_score
    if not judge.kind.pass_fail:
        note = f"a judge on a {judge.scale.describe()} scale has no LoRA step (pass/fail only)"
        return alignment, JudgeLora(0, rubric_val, note=note)
    if not train or not val:  # trl raises on an empty training set; kappa on an empty val
        note = f"{len(train)} training and {len(val)} validation labels: too few to train on"
        return alignment, JudgeLora(0, rubric_val, note=note)
    notes = ReviewedMemory(train, memory) if memory else None
    reader = PointwiseJudge(lm, judge.prompts, memory=notes)
    records = pointwise_records(
        judge.prompts["rubric"],
        train,
        seed,
        injections,
        comments,
        messages=lambda item: reader.messages(item, PASS_QUESTION),  # the prompt it is read on
        mismatched_replies=mismatched,
    )
    started = time.perf_counter()
    folders = await train_adapter(records)
    step = JudgeLora(len(records), rubric_val, seconds=time.perf_counter() - started, memory=memory)
    best: tuple[float, float, Path] | None = None  # (val kappa, threshold, folder)
    for folder in folders:
        if notes is not None:
            notes.save(folder)
        cut, kappa = await fit_and_validate(
            lm, judge.prompts, train, val, str(folder), cut_on_val_too=True
        )
        step.checkpoints[folder.name] = kappa
        if done is not None:
            done(1)
        if best is None or beats(kappa, best[0]):
            best = (kappa, cut, folder)
    if best is None or not beats(best[0], rubric_val):
        step.note = (
            f"no checkpoint agreed better on the validation labels than the rubric alone "
            f"(kappa {step.best_val if step.best_val is not None else float('nan'):.3f} vs "
            f"{rubric_val:.3f}): the rubric stays alone"
        )
        return alignment, step
    _, cut, folder = best
    report, verdicts = await heldout_agreement(lm, judge.prompts, cut, heldout, seed, str(folder))
    step.kept, step.heldout = str(folder), report
    tuned = replace(  # notes inside
        judge, threshold=cut, heldout=report, heldout_verdicts=verdicts, adapter=str(folder)
    )
    return replace(alignment, judge=tuned), step
