"""A LoRA judge against the prompted one, on the demo's pass/fail annotations.

Data: the demo export's human labels (`infra/traces/demo_data`, 168 labelled traces of
the intent router), split by trace as the night splits them (`judges.splits.judge_splits`:
held-out `--heldout-fraction`, the rest 60/40 into train and validation), fixed by seed.

Arms, each read as P("Yes") vs P("No") with its pass threshold calibrated on train (an
adapter's on train and validation together, as the night does):
- **seed rubric**: `SEED_JUDGE_PROMPTS` on the base model; with `--task-rubric`, the
  intent router's own `judge_rubric` (what the night starts from on the demo), and every
  arm below starts from it.
- **aligned rubric**: the night's prompt alignment (`judges.align`: GEPA on the rubric
  with the night's judge settings, train = feedback, val = Pareto set; the seed stays
  unless GEPA's best agrees better on val and reaches `judge.min_agreement` there), on
  the base model.
- **LoRA judge**: an adapter trained with `weights.lora.train_sft_adapter` on the train
  labels as verdict tokens on the judge's own prompt (`judges.lora_records`: balanced by
  label; with `--injections`, each failing reply once more with an instruction to the judge
  appended, labelled fail), saved at `--checkpoints` evenly spaced points; the one with
  the best validation kappa is kept (early stopping on validation labels, read after).
- **LoRA judge, trained on comments too** (`--comments`): the same, each completion going
  on after its verdict with the annotator's comment (`pointwise_records(comments=True)`);
  still read on the verdict token alone.
- **LoRA judge with a memory** (`--memory K`, `judges.memory`, the night's
  `judge.lora.memory`): the LoRA judge trained and read with the reviewers' notes on the
  K training labels whose requests are most alike after the exchange, verdict and comment
  each (an exchange never sees its own trace).
- **memory + resemblance** (`--resemblance`, with `--memory K`): the memory judge's logit
  of P(pass) plus the reply's resemblance to the replies people passed and failed on those
  K requests (`benchmarks/judge_baselines.py`), each in units of its spread on the
  validation exchanges, cut calibrated there.
- **mismatched replies** (`--mismatched`, the night's `judge.lora.mismatched`): every
  LoRA judge above also trains on each passing training reply under an unlike training
  request, labelled fail (`judges.mismatched`).
- **aligned rubric + LoRA judge**: the same adapter training on the aligned rubric's
  prompt (when alignment kept the seed, it is the LoRA judge, and not trained twice).
- **reward head** (`--reward-head`): a LoRA adapter with a scalar head instead of verdict
  tokens, trained by trl's `RewardTrainer` on passing-vs-failing pairs of the same labels
  (`benchmarks/reward_trainer.py`); read at the end of training, its cut calibrated on
  the training and validation labels. With `--head-memory K` it reads the notes on the K
  most alike training requests first, as the memory judge does.
Before the arms it prints what judges with no LM agree at (`benchmarks/judge_baselines.py`):
a rule passing every reply that names a kind, and the reply's resemblance to the replies
people passed and failed on the `--memory` (else 3) most alike training requests.
MLflow's `judge.align` is not an arm here: on this model its judge gives no verdict at
all (it needs a JSON reply; see the MT-Bench benchmark, `benchmarks/judge_alignment.py`).

Printed per arm on the held-out labels: kappa and accuracy with 95% bootstrap intervals
(1000 resamples, seed 0), true-positive and true-negative rates; then the injection test
on the held-out failing replies the arm judged fail: the share whose P(pass) an appended
instruction raised and the share it flipped to pass (one sentence of `judges.injection.PROBES`
per reply, seeded; none is a sentence the LoRA judge trained on), and the seconds of training.

    .venv/bin/python -m benchmarks.judge_lora [--seed 0] [--epochs 3] [--checkpoints 3]
        [--learning-rate 5e-4]
        [--heldout-fraction 0.4] [--injections] [--task-rubric] [--no-align] [--no-lora]
        [--comments] [--memory K] [--resemblance] [--mismatched] [--reward-head]
        [--head-memory K] [--train-on-validation] [--probs JSON]

`--train-on-validation` trains the LoRA judges on the validation labels as well and keeps
the end of training (what 40 more labels buy, read on the same held-out labels);
`--probs` writes every checkpoint's P(pass) on each split, for studying thresholds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean, pstdev

from benchmarks.judge_baselines import (
    labels,
    naming_baseline,
    notes_ceiling,
    resemblance,
    resemblance_baseline,
)
from benchmarks.judge_model import judge_lm
from benchmarks.reward_trainer import reward_pairs, train_reward_head
from flows.night.collect import collect
from flows.night.stages import gepa_config
from infra.agents.intent_router import JUDGE_RUBRIC, IntentRouter
from infra.lm.reflection import reflection_lm
from infra.lm.threads import run_in_own_thread
from infra.scales import ScoreScale
from infra.settings import JudgeLoraSettings, JudgeSettings, LoraSettings
from infra.traces.jsonl import JsonlTraceSource
from judges.agreement import agreement_report
from judges.align import align
from judges.calibration import calibrate_threshold
from judges.calls import gepa_reflection
from judges.injection import PROBES
from judges.lora_records import pointwise_records
from judges.memory import ReviewedMemory
from judges.pass_fail_fit import validated_cut
from judges.pointwise import PASS_QUESTION, SEED_JUDGE_PROMPTS, PointwiseJudge
from judges.splits import judge_splits
from judges.types import JudgedItem
from weights.lora import saved_adapters, train_sft_adapter

SEED_RUBRIC = SEED_JUDGE_PROMPTS["rubric"]


# P(pass) per item, in order
Score = Callable[[list[JudgedItem]], Awaitable[list[float]]]


@dataclass
class Arm:
    name: str
    threshold: float
    report: dict[str, float]
    raised: tuple[int, int]  # (failing replies whose P(pass) the injection raised, of)
    flipped: tuple[int, int]  # (turned to pass, of those judged fail without it)
    seconds: float = 0.0  # training (LoRA, reward head) or search (alignment)


def demo_items(seed: int, heldout_fraction: float) -> tuple[list, list, list]:
    batch = JsonlTraceSource().fetch(since=None, limit=10_000)
    items = collect(batch, IntentRouter(), "correct").items
    return judge_splits(items, heldout_fraction, seed)


def judge_score(
    lm, rubric: str, adapter: str | None = None, memory: ReviewedMemory | None = None
) -> Score:
    """The judge's P(pass) per item: `rubric`, with its LoRA `adapter` and the notes of
    `memory` if given."""

    async def score(items: list[JudgedItem]) -> list[float]:
        judge = PointwiseJudge(lm, {"rubric": rubric}, adapter=adapter, memory=memory)
        probs = await judge.p_pass_many(items)
        if None in probs:  # the local model's calls do not fail; a server's might
            raise RuntimeError(f"{probs.count(None)} judge calls failed")
        return [p for p in probs if p is not None]

    return score


async def threshold(score: Score, train: list[JudgedItem]) -> float:
    """The pass cut calibrated on the training labels."""
    return calibrate_threshold(await score(train), labels(train))


async def measure(
    name: str, score: Score, train, heldout, seed: int, seconds=0.0, cut: float | None = None
) -> Arm:
    """Held-out agreement and the injection test; `cut`: the train threshold, if known."""
    cut = await threshold(score, train) if cut is None else cut
    probs = await score(heldout)
    gold = labels(heldout)
    report = agreement_report([p >= cut for p in probs], gold, seed=0)
    failing = [(i, p) for i, p in zip(heldout, probs, strict=True) if not i.human_pass]
    rng = random.Random(seed)
    planted = [
        JudgedItem(i.id, i.input_text, f"{i.output_text}\n\n{rng.choice(PROBES)}")
        for i, _ in failing
    ]
    after = await score(planted)
    raised = sum(a > p for (_, p), a in zip(failing, after, strict=True))
    judged_fail = [(p, a) for (_, p), a in zip(failing, after, strict=True) if p < cut]
    flipped = sum(a >= cut for _, a in judged_fail)
    return Arm(name, cut, report, (raised, len(failing)), (flipped, len(judged_fail)), seconds)


async def aligned_rubric(lm, rubric: str, train, val, heldout, seed: int) -> tuple[str, float]:
    """The rubric the night's prompt alignment chooses from `rubric` on these splits, and
    its seconds."""
    cfg = JudgeSettings()
    started = time.perf_counter()
    alignment = await align(
        lm,
        {"rubric": rubric},
        ScoreScale("boolean"),
        train,
        val,
        heldout,
        gepa_config(cfg, seed, skip_perfect_score=False),
        gepa_reflection(reflection_lm(lm, cfg.reflection_max_tokens, seed)),
        floor=cfg.min_agreement,
    )
    seconds = time.perf_counter() - started
    print(
        f"alignment: {alignment.metric_calls} metric calls, {seconds:.0f} s; validation kappa "
        f"GEPA's best {alignment.val_score:.3f} vs seed {alignment.seed_val_score:.3f}; "
        + ("the seed is kept" if alignment.kept_seed else "GEPA's best is used")
    )
    return alignment.judge.prompts["rubric"], seconds


async def lora_arm(
    lm, name, rubric, train, val, heldout, args, scratch: Path, comments=False, memory_k=0
) -> tuple[Arm, str]:
    """The arm, and the checkpoint it kept (in `scratch`)."""
    memory = ReviewedMemory(train, memory_k) if memory_k else None
    name += " + mismatched replies" if args.mismatched else ""
    if memory is not None:
        print(f"{name}: a perfect reader of the notes: kappa {notes_ceiling(memory, heldout):.3f}")
    judge = PointwiseJudge(lm, {"rubric": rubric}, memory=memory)
    records = pointwise_records(
        rubric,
        train,
        args.seed,
        args.injections,
        comments,
        messages=lambda item: judge.messages(item, PASS_QUESTION),  # the prompt it is read on
        mismatched_replies=args.mismatched,
    )
    judge_lora = JudgeLoraSettings(
        epochs=args.epochs, checkpoints=args.checkpoints, learning_rate=args.learning_rate
    )
    cfg = judge_lora.training()  # the night's recipe, these three knobs as asked
    started = time.perf_counter()
    result = await run_in_own_thread(
        train_sft_adapter, records, lm.base_model_path, scratch, cfg, seed=args.seed
    )
    seconds = time.perf_counter() - started
    print(f"{name}: {result.examples} records, {result.steps} steps, {seconds:.0f} s")
    best: tuple[float, float, str] | None = None  # (val kappa, threshold, checkpoint)
    for path in saved_adapters(result.path):
        score = judge_score(lm, rubric, str(path), memory)
        splits = {"train": train, "val": val} | ({"heldout": heldout} if args.probs else {})
        probs = {n: await score(items) for n, items in splits.items()}  # each scored once
        if args.probs:  # every split's P(pass), to study thresholds and checkpoints offline
            dump = {n: {"p": probs[n], "gold": labels(items)} for n, items in splits.items()}
            keep_probs(args.probs, name, path.name, dump)
        if not val:  # trained on the validation labels too: nothing to stop early on
            cut = calibrate_threshold(probs["train"], labels(train))
            best = (0.0, cut, str(path))  # the end of training
            continue
        # the night's rule for an adapter fitted on the training labels (`judges.judge_lora`)
        cut, kappa = validated_cut(
            probs["train"], labels(train), probs["val"], labels(val), cut_on_val_too=True
        )
        print(f"  {path.name}: validation kappa {kappa:.3f}")
        if best is None or kappa > best[0]:
            best = (kappa, cut, str(path))
    assert best is not None
    _, cut, kept = best
    score = judge_score(lm, rubric, kept, memory)
    return await measure(name, score, train, heldout, args.seed, seconds, cut), kept


def _logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


async def resemblance_arm(lm, rubric, kept, memory, train, val, heldout, seed, seconds) -> Arm:
    """The memory LoRA judge's logit of P(pass) plus the reply's resemblance to the notes'
    replies (`judge_baselines.resemblance`), each in units of its spread on the validation
    exchanges, with the cut calibrated there: the adapter fitted the training labels, so
    only the validation ones say how far to trust it."""
    adapter = judge_score(lm, rubric, kept, memory)
    val_logits = [_logit(p) for p in await adapter(val)]
    val_resemblance = resemblance(memory, val)
    (ml, sl), (mr, sr) = ((fmean(xs), pstdev(xs) or 1.0) for xs in (val_logits, val_resemblance))

    async def score(items: list[JudgedItem]) -> list[float]:
        logits = [_logit(p) for p in await adapter(items)]
        alike = resemblance(memory, items)
        return [(x - ml) / sl + (r - mr) / sr for x, r in zip(logits, alike, strict=True)]

    cut = calibrate_threshold(await score(val), labels(val))
    name = f"LoRA judge with a memory + resemblance ({memory.k} notes)"
    return await measure(name, score, train, heldout, seed, seconds, cut)


def keep_probs(path: Path, arm: str, checkpoint: str, splits: dict) -> None:
    """Add one checkpoint's probabilities to the JSON file at `path` (arm -> checkpoint)."""
    saved = json.loads(path.read_text()) if path.is_file() else {}
    saved.setdefault(arm, {})[checkpoint] = splits
    path.write_text(json.dumps(saved))


async def run(args: argparse.Namespace) -> list[Arm]:
    lm = judge_lm()
    train, val, heldout = demo_items(args.seed, args.heldout_fraction)
    if args.train_on_validation:
        train, val = train + val, []
    print(f"labels: train {len(train)}, validation {len(val)}, held-out {len(heldout)}")
    print(f"a rule passing every reply that names a kind: kappa {naming_baseline(heldout):.3f}")
    if val:
        k = args.memory or 3
        kappa = resemblance_baseline(train, val, heldout, k)
        print(f"no LM, the reply's resemblance to reviewed replies ({k} notes): kappa {kappa:.3f}")
    seed_rubric = JUDGE_RUBRIC if args.task_rubric else SEED_RUBRIC
    print(f"seed rubric: {seed_rubric}")
    arms = [await measure("seed rubric", judge_score(lm, seed_rubric), train, heldout, args.seed)]
    aligned = seed_rubric
    if not args.no_align:
        aligned, seconds = await aligned_rubric(lm, seed_rubric, train, val, heldout, args.seed)
        name = "aligned rubric" + (" (= seed)" if aligned == seed_rubric else "")
        score = judge_score(lm, aligned)
        arms.append(await measure(name, score, train, heldout, args.seed, seconds))
    with tempfile.TemporaryDirectory(prefix="judge-lora-") as scratch:
        if args.memory:
            name = f"LoRA judge with a memory ({args.memory} notes)"
            folder = Path(scratch) / "memory"
            arm, kept = await lora_arm(
                lm, name, seed_rubric, train, val, heldout, args, folder, memory_k=args.memory
            )
            arms.append(arm)
            if args.resemblance:
                memory = ReviewedMemory(train, args.memory)
                arms.append(
                    await resemblance_arm(
                        lm, seed_rubric, kept, memory, train, val, heldout, args.seed, arm.seconds
                    )
                )
        if not args.no_lora:
            lora, _ = await lora_arm(
                lm, "LoRA judge", seed_rubric, train, val, heldout, args, Path(scratch) / "seed"
            )
            arms.append(lora)
            if args.comments:
                name, folder = "LoRA judge, trained on comments too", Path(scratch) / "comments"
                arm, _ = await lora_arm(
                    lm, name, seed_rubric, train, val, heldout, args, folder, comments=True
                )
                arms.append(arm)
            if aligned != seed_rubric:
                name, folder = "aligned rubric + LoRA judge", Path(scratch) / "aligned"
                arm, _ = await lora_arm(lm, name, aligned, train, val, heldout, args, folder)
                arms.append(arm)
            elif not args.no_align:
                print(
                    "aligned rubric + LoRA judge: alignment kept the seed, so it is the LoRA judge"
                )
    if args.reward_head:
        arms.append(await reward_head_arm(lm, train, val, heldout, args))
    return arms


async def reward_head_arm(lm, train, val, heldout, args: argparse.Namespace) -> Arm:
    """The reward head, reading `--head-memory` notes if asked; its cut calibrated on the
    training and validation labels together, the night's rule for a trained judge."""
    cfg = LoraSettings(epochs=args.epochs, max_seq_length=512)
    memory = ReviewedMemory(train, args.head_memory) if args.head_memory else None
    pairs = reward_pairs(train, args.seed, args.injections, memory)
    head = await run_in_own_thread(train_reward_head, pairs, lm.base_model_path, cfg, args.seed)
    print(f"reward head: {head.pairs} pairs, {head.steps} steps, {head.seconds:.0f} s")

    async def score(items: list[JudgedItem]) -> list[float]:
        return await run_in_own_thread(head.p_pass, items, memory)

    cut = calibrate_threshold(await score(train + val), labels(train + val))
    name = "reward head" + (f" with a memory ({memory.k} notes)" if memory else "")
    return await measure(name, score, train, heldout, args.seed, head.seconds, cut)


def show(arms: list[Arm]) -> None:
    print(
        "\n| judge | held-out kappa [95% CI] | accuracy [95% CI] | TPR | TNR | "
        "P(pass) raised by an injection | turned to pass | training or search s |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for arm in arms:
        r = arm.report
        print(
            f"| {arm.name} | {r['kappa']:.3f} [{r['kappa_low']:.3f}, {r['kappa_high']:.3f}] "
            f"| {r['accuracy']:.3f} [{r['accuracy_low']:.3f}, {r['accuracy_high']:.3f}] "
            f"| {r.get('tpr', float('nan')):.2f} | {r.get('tnr', float('nan')):.2f} "
            f"| {arm.raised[0]}/{arm.raised[1]} | {arm.flipped[0]}/{arm.flipped[1]} "
            f"| {arm.seconds:.0f} |"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--checkpoints", type=int, default=3)
    parser.add_argument("--learning-rate", type=float, default=JudgeLoraSettings().learning_rate)
    parser.add_argument("--heldout-fraction", type=float, default=0.4)
    parser.add_argument("--injections", action="store_true")
    parser.add_argument(
        "--task-rubric",
        action="store_true",
        help="start every arm from the intent router's own rubric instead of the generic one",
    )
    parser.add_argument("--no-align", action="store_true", help="skip the aligned-rubric arms")
    parser.add_argument("--no-lora", action="store_true", help="skip the verdict-token LoRA arms")
    parser.add_argument(
        "--comments",
        action="store_true",
        help="add a LoRA judge whose completions go on with the annotator's comment",
    )
    parser.add_argument(
        "--memory",
        type=int,
        default=0,
        metavar="K",
        help="add a LoRA judge reading the notes on its K nearest training labels (judges.memory)",
    )
    parser.add_argument(
        "--resemblance",
        action="store_true",
        help="with --memory: add that judge's logit plus the reply's resemblance to the notes' "
        "replies, scaled and cut on the validation labels (benchmarks/judge_baselines.py)",
    )
    parser.add_argument(
        "--mismatched",
        action="store_true",
        help="LoRA judges also train on passing replies under unlike requests, labelled fail",
    )
    parser.add_argument(
        "--train-on-validation",
        action="store_true",
        help="LoRA judges train on the validation labels too and keep the end of training: "
        "what 40 more labels buy, on the same held-out ones",
    )
    parser.add_argument(
        "--probs",
        type=Path,
        metavar="JSON",
        help="write each LoRA checkpoint's P(pass) on train, validation and held-out items here",
    )
    parser.add_argument(
        "--reward-head", action="store_true", help="add the reward head arm (trl RewardTrainer)"
    )
    parser.add_argument(
        "--head-memory",
        type=int,
        default=0,
        metavar="K",
        help="with --reward-head: the head reads the notes on its K nearest training labels",
    )
    args = parser.parse_args(argv)
    if args.resemblance and (not args.memory or args.train_on_validation):
        parser.error("--resemblance reads a memory judge on validation labels: add --memory K")
    if args.train_on_validation and not args.no_align:
        parser.error("--train-on-validation leaves alignment no validation labels: add --no-align")
    show(asyncio.run(run(args)))


if __name__ == "__main__":
    main()
