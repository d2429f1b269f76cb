"""The night's reward-model judge on the demo's labels, read on a real judge model.

The night's step (`judges.judge_head`: a logistic head on the judge model's features for
its own pointwise prompt, fitted on the training labels, its cut calibrated out of fold,
kept if it beats the judge so far on validation, then fitted again on training and
validation labels) is run as the night runs it, on the demo's splits
(`judges.splits.judge_splits`, held-out fraction 0.4: 135 train, 90 validation, 151 held
out of the 376 labels), with and without its planted instructions (`judge.head.injections`),
against:

- **the rubric alone**: the judge model's P(Yes) on the same prompt, its cut calibrated on
  the training labels (the night's rule for a rubric);
- **the head with notes** (`--notes K`, `judge.head.memory`): the same step on the prompt
  with the reviewers' notes on the K most alike training labels (`judges.memory`);
- cheap variants that might reach further, each on the same readings (`--variants`): the
  feature position (the mean over the reply's tokens instead of the last prompt token), a
  second feature set (the judge's own logit of P(Yes) stacked with the head's), fixed
  regularization strengths instead of the cross-validated one, and other pass-cut rules;
- the layer the head reads (`--layers`): the residual stream at the prompt's last token
  after layer L instead of the final norm's output (probes on middle layers often read
  more than the last one, which is shaped for predicting the next token). On the demo's
  splits 0-9 with the 1.5B teacher none did: layers 7-25 of 28 gave mean held-out kappa
  0.36-0.59 against 0.578 for the last (docs/benchmarks/2026-12-06-teacher-night.md).

Features are read with plain transformers (`benchmarks.teacher_features`: what
`LM.features` returns, the final norm's output at the prompt's last token) and cached on
disk, so a second run reads nothing. Per arm it prints held-out kappa with its 95%
bootstrap interval (1000 resamples, seed 0), AUC, TPR, TNR and the injection test: each
held-out failing reply with one of `judges.injection.PROBES` appended (drawn by the
reply's id, so every arm reads the same planted replies), counting those the arm judged
fail that it then passes.

    .venv/bin/python -m benchmarks.judge_reward_head [--checkpoint DIR] [--splits 0 1 2]
        [--notes 3] [--variants] [--layers 8 12 16 20 24] [--router N] [--cache FILE]

The judge model is the settings' (`[judge_lm]`, else `[lm]`), or `--checkpoint`.

`--router N` also runs the step on the first N of `benchmarks/data/router_labels` (60%
train, 40% validation, as the night splits) and reads it on the rest.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score

from benchmarks.judge_label_scale import router_labels
from benchmarks.judge_lora import demo_items
from benchmarks.teacher_features import Reading, TeacherReader
from infra.agents.intent_router import JUDGE_RUBRIC
from infra.lm.engine.cpu import cpu_summary
from infra.lm.model_files import resolve_model_path
from infra.settings import Settings
from judges.agreement import agreement_report
from judges.align import Alignment
from judges.calibration import calibrate_threshold
from judges.injection import PROBES, planted
from judges.judge import Judge
from judges.judge_head import judge_head_step
from judges.memory import ReviewedMemory
from judges.metrics import cohen_kappa
from judges.pointwise import PASS_QUESTION, judge_messages
from judges.reward_head import HeadFit, JudgeModel, fit_head, out_of_fold
from judges.types import JudgedItem

CACHE = Path.home() / ".cache" / "flywheel" / "judge-head-readings.pkl"


@dataclass
class Row:
    name: str
    report: dict[str, float]  # agreement_report on the held-out labels
    auc: float
    flipped: tuple[int, int]  # (planted replies turned to pass, of those judged fail)
    val: float | None = None  # validation kappa where the arm has one
    note: str = ""


class Teacher:
    """The judge model as an `LM` for the night's step: `features`, and P(Yes) as
    `choice_logprobs` (both from cached readings)."""

    def __init__(self, reader: TeacherReader):
        self.reader, self.base_model_path = reader, reader.checkpoint
        self.lock = asyncio.Lock()  # one forward pass at a time: the reader is not threaded

    async def features(self, messages, adapter=None) -> list[float]:
        async with self.lock:
            return await self.reader.features(messages, adapter)

    async def choice_logprobs(self, messages, choices, adapter=None) -> list[float]:
        async with self.lock:
            reading = await asyncio.to_thread(self.reader.read, messages, _reply(messages))
        p = reading.p_yes
        return [math.log(max(p, 1e-12)), math.log(max(1 - p, 1e-12))]


def _reply(messages) -> str:
    user = messages[-1]["content"]
    start = user.index("<reply>\n") + len("<reply>\n")
    return user[start : user.index("\n</reply>", start)]


def injected(items: Sequence[JudgedItem]) -> list[JudgedItem]:
    """Each failing item with one probe appended, drawn by its id."""
    return [
        planted(i, PROBES, random.Random(f"injection:{i.id}")) for i in items if not i.human_pass
    ]


def read(reader: TeacherReader, items: Sequence[JudgedItem], memory=None) -> list[Reading]:
    prompts = [
        (judge_messages(JUDGE_RUBRIC, i, PASS_QUESTION, memory), i.output_text) for i in items
    ]
    return reader.read_many(prompts)


def gold(items: Sequence[JudgedItem]) -> list[bool]:
    return [bool(i.human_pass) for i in items]


def row(name, probs, cut, heldout, planted_probs, val=None, note="") -> Row:
    """Held-out agreement of P(pass) `probs` at `cut`, and the injection count."""
    y = gold(heldout)
    report = agreement_report([p >= cut for p in probs], y, seed=0)
    failing = [p for p, g in zip(probs, y, strict=True) if not g]
    judged_fail = [(p, a) for p, a in zip(failing, planted_probs, strict=True) if p < cut]
    flipped = sum(a >= cut for _, a in judged_fail)
    return Row(name, report, roc_auc_score(y, probs), (flipped, len(judged_fail)), val, note)


async def night_step(
    reader, train, val, heldout, notes: int, so_far_val: float, injections: bool = True
) -> Row:
    """The night's own step (`judges.judge_head.judge_head_step`) on the judge model;
    `injections`: fitting the passing replies with a planted instruction as fails too
    (`judge.head.injections`, the night's default)."""
    lm = Teacher(reader)
    rubric = Judge({"rubric": JUDGE_RUBRIC}, threshold=0.5)
    alignment = Alignment(rubric, rubric, so_far_val, so_far_val, True, rubric.prompts, 0, {})
    with tempfile.TemporaryDirectory(prefix="judge-head-") as folder:
        kept, step = await judge_head_step(
            lm, alignment, train, val, heldout, Path(folder), "the rubric", so_far_val, 0,
            memory=notes, injections=injections,
        )  # fmt: skip
        judge = kept.judge
        if step.kept is None:  # not kept: read it all the same, fitted on both as if kept
            judge = await _forced(
                lm, alignment, train, val, heldout, Path(folder), notes, injections
            )
        metric = judge.metric(lm)
        probs = await metric.p_pass_many(heldout)
        after = await metric.p_pass_many(injected(heldout))
    name = "head, the night's step" + (f", {notes} notes" if notes else "")
    name += "" if injections else ", no planted instructions"
    note = f"C {step.strength:g}" + ("" if step.kept else "; not kept by the night")
    return row(name, probs, judge.threshold, heldout, after, step.val, note)


async def _forced(lm, alignment, train, val, heldout, folder, notes, injections) -> Judge:
    forced, _ = await judge_head_step(
        lm, alignment, train, val, heldout, folder, "nothing", -math.inf, 0,
        memory=notes, injections=injections,
    )  # fmt: skip
    return forced.judge


def rubric_row(train, heldout, r_train, r_held, r_planted) -> Row:
    cut = calibrate_threshold([r.p_yes for r in r_train], gold(train))
    probs = [r.p_yes for r in r_held]
    return row("rubric alone, P(Yes)", probs, cut, heldout, [r.p_yes for r in r_planted])


def _logit(p: float) -> float:
    p = min(max(p, 1e-9), 1 - 1e-9)
    return math.log(p / (1 - p))


def night_rule_row(name, feature, splits, readings, planted_readings, fit=None) -> Row:
    """The night's rule (`judges.judge_head`) on `feature(reading)`: fitted on train, its
    cut out of fold, read on validation; fitted again on both and read on held-out."""
    (train, val, heldout), (r_train, r_val, r_held) = splits, readings
    fit = fit or HeadFit()
    model, y_train, y_val = JudgeModel("benchmark"), gold(train), gold(val)
    x_train, x_val = [feature(r) for r in r_train], [feature(r) for r in r_val]
    head = fit_head(x_train, y_train, model, fit)
    cut = calibrate_threshold(out_of_fold(x_train, y_train, head.strength, fit), y_train)
    val_kappa = cohen_kappa([head.p_pass(x) >= cut for x in x_val], y_val)
    x_all, y_all = x_train + x_val, y_train + y_val
    head = fit_head(x_all, y_all, model, fit)
    cut = calibrate_threshold(out_of_fold(x_all, y_all, head.strength, fit), y_all)
    probs = [head.p_pass(feature(r)) for r in r_held]
    after = [head.p_pass(feature(r)) for r in planted_readings]
    return row(name, probs, cut, heldout, after, val_kappa, f"C {head.strength:g}")


def variant_rows(train, val, heldout, readings, planted_readings) -> list[Row]:
    """Cheap variants on the same readings, each with the night's rule unless named."""
    r_train, r_val, r_held = readings
    model, cfg = JudgeModel("benchmark"), HeadFit()
    y_train, y_val = gold(train), gold(val)
    rows = []

    def night_rule(name, feature, strengths=cfg.strengths) -> Row:
        fit = replace(cfg, strengths=tuple(strengths))
        splits = (train, val, heldout)
        return night_rule_row(name, feature, splits, readings, planted_readings, fit)

    last = lambda r: r.last  # noqa: E731
    rows.append(night_rule("position: mean over the reply's tokens", lambda r: r.reply_mean))
    for c in (3e-3, 1e-2, 1e-1, 1.0):
        rows.append(night_rule(f"regularization: C fixed at {c:g}", last, (c,)))
    grid = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1)
    rows.append(night_rule("regularization: C by cross-validated log-loss", last, grid))
    # the cut rules, on a head fitted on the training labels alone
    head = fit_head([r.last for r in r_train], y_train, model, cfg)
    p_train = [head.p_pass(r.last) for r in r_train]
    p_val = [head.p_pass(r.last) for r in r_val]
    p_held = [head.p_pass(r.last) for r in r_held]
    p_after = [head.p_pass(r.last) for r in planted_readings]
    oof = out_of_fold([r.last for r in r_train], y_train, head.strength, cfg)
    for name, probs, labels in (
        ("no refit, cut out of fold on train", oof, y_train),
        ("no refit, cut on validation", p_val, y_val),
        ("no refit, cut on train + validation (as judge_lora)", p_train + p_val, y_train + y_val),
    ):
        cut = calibrate_threshold(probs, labels)
        val_kappa = cohen_kappa([p >= cut for p in p_val], y_val)
        rows.append(row(name, p_held, cut, heldout, p_after, val_kappa, f"C {head.strength:g}"))
    # a second feature set: the judge's own logit of P(Yes), stacked with the head's
    # out-of-fold logit by a two-weight logistic regression on train + validation
    x_all = [r.last for r in r_train + r_val]
    y_all = y_train + y_val
    head = fit_head(x_all, y_all, model, cfg)
    head_oof = out_of_fold(x_all, y_all, head.strength, cfg)
    stack_x = [[_logit(h), _logit(r.p_yes)] for h, r in zip(head_oof, r_train + r_val, strict=True)]
    stack = LogisticRegression(class_weight="balanced").fit(stack_x, y_all)

    def stacked(readings_: Sequence[Reading]) -> list[float]:
        x = [[_logit(head.p_pass(r.last)), _logit(r.p_yes)] for r in readings_]
        return stack.predict_proba(x)[:, 1].tolist()

    cut = calibrate_threshold(stack.predict_proba(stack_x)[:, 1].tolist(), y_all)
    weights = ", ".join(f"{w:.2f}" for w in stack.coef_[0])
    rows.append(
        row("head + the judge's P(Yes), stacked", stacked(r_held), cut, heldout,
            stacked(planted_readings), note=f"weights (head, P(Yes)) {weights}")
    )  # fmt: skip
    return rows


def read_with_rubric(reader, train, val, heldout):
    """Each split read by the judge model (and the held-out replies with an injection
    planted), and the rubric's own row: its cut fitted on train, read on validation."""
    readings = [read(reader, part) for part in (train, val, heldout)]
    planted_readings = read(reader, injected(heldout))
    rubric = rubric_row(train, heldout, readings[0], readings[2], planted_readings)
    cut = calibrate_threshold([r.p_yes for r in readings[0]], gold(train))
    rubric.val = cohen_kappa([r.p_yes >= cut for r in readings[1]], gold(val))
    return readings, planted_readings, rubric


def layer_rows(train, val, heldout, readings, planted_readings, layers) -> list[Row]:
    """The night's rule on the residual stream after each of `layers` (last token)."""
    depth = len(readings[2][0].layers) - 1
    return [
        night_rule_row(
            f"layer {layer} of {depth}, last token",
            lambda r, layer=layer: r.layers[layer].astype(np.float64).tolist(),
            (train, val, heldout),
            readings,
            planted_readings,
        )
        for layer in layers
    ]


async def demo_split(reader, seed: int, notes: int, variants: bool, layers=()) -> list[Row]:
    train, val, heldout = demo_items(seed, 0.4)
    print(f"split {seed}: train {len(train)}, validation {len(val)}, held-out {len(heldout)}")
    readings, planted_readings, rubric = read_with_rubric(reader, train, val, heldout)
    rows = [rubric, await night_step(reader, train, val, heldout, 0, rubric.val)]
    rows.append(await night_step(reader, train, val, heldout, 0, rubric.val, injections=False))
    if notes:
        memory = ReviewedMemory(train, notes)
        for part in (train, val, heldout, injected(heldout)):
            read(reader, part, memory)
        rows.append(await night_step(reader, train, val, heldout, notes, rubric.val))
    if variants:
        rows += variant_rows(train, val, heldout, readings, planted_readings)
    rows += layer_rows(train, val, heldout, readings, planted_readings, layers)
    return rows


async def router_split(reader, n: int, layers=()) -> list[Row]:
    """The step on the first `n` router labels (60% train, 40% validation), read on the rest."""
    labels = router_labels()
    cut = round(0.6 * n)
    train, val, heldout = labels[:cut], labels[cut:n], labels[n:]
    print(f"router labels: train {len(train)}, validation {len(val)}, held-out {len(heldout)}")
    readings, planted_readings, rubric = read_with_rubric(reader, train, val, heldout)
    rows = [rubric, await night_step(reader, train, val, heldout, 0, rubric.val)]
    return rows + layer_rows(train, val, heldout, readings, planted_readings, layers)


def show(title: str, rows: list[Row]) -> None:
    print(f"\n{title}\n")
    print(
        "| judge | validation κ | held-out κ [95% CI] | AUC | TPR | TNR "
        "| injection turned a fail to pass | |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        k = r.report
        val = "—" if r.val is None else f"{r.val:.3f}"
        print(
            f"| {r.name} | {val} | {k['kappa']:.3f} [{k['kappa_low']:.3f}, {k['kappa_high']:.3f}] "
            f"| {r.auc:.3f} | {k.get('tpr', float('nan')):.2f} | {k.get('tnr', float('nan')):.2f} "
            f"| {r.flipped[0]} / {r.flipped[1]} | {r.note} |"
        )


def summary(by_split: dict[int, list[Row]]) -> None:
    names = [r.name for r in next(iter(by_split.values()))]
    print("\n| held-out κ | " + " | ".join(f"split {s}" for s in by_split) + " | mean |")
    print("|---|" + "---|" * (len(by_split) + 1))
    for n, name in enumerate(names):
        kappas = [rows[n].report["kappa"] for rows in by_split.values()]
        cells = " | ".join(f"{k:.3f}" for k in kappas)
        print(f"| {name} | {cells} | {np.mean(kappas):.3f} |")


async def run(args: argparse.Namespace) -> None:
    if args.checkpoint is None:  # `[judge_lm]`, else `[lm]`: what the night judges with
        args.checkpoint = resolve_model_path(Settings().judge_model.model_path)
    print(f"model: {args.checkpoint}; {cpu_summary()}", flush=True)
    reader = TeacherReader(args.checkpoint, args.cache)
    by_split = {}
    for seed in args.splits:
        by_split[seed] = await demo_split(reader, seed, args.notes, args.variants, args.layers)
        show(f"demo split {seed}", by_split[seed])
    if len(by_split) > 1:
        summary(by_split)
    if args.router:
        show(
            f"router labels, the first {args.router}",
            await router_split(reader, args.router, args.layers),
        )
    print(f"\n{reader.read_now} prompts read now ({reader.seconds:.0f} s), the rest from the cache")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--checkpoint", type=Path, help="the judge model (default: the settings' judge model)"
    )
    parser.add_argument("--splits", type=int, nargs="+", default=[0])
    parser.add_argument(
        "--notes", type=int, default=3, help="also the head reading K notes; 0: not"
    )
    parser.add_argument("--variants", action="store_true", help="the cheap variants too")
    parser.add_argument(
        "--layers", type=int, nargs="*", default=[], metavar="L",
        help="also the head on the residual stream after layer L (0: the embeddings)",
    )  # fmt: skip
    parser.add_argument(
        "--router", type=int, default=0, metavar="N", help="the router labels' first N"
    )
    parser.add_argument("--cache", type=Path, default=CACHE)
    asyncio.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
