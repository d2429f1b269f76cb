"""A LoRA judge against the prompted one, on the demo's pass/fail annotations.

Data: the demo export's human labels (`infra/traces/demo_data`, 168 labelled traces of
the intent router), split by trace as the night splits them (`judges.splits.judge_splits`:
held-out `--heldout-fraction`, the rest 60/40 into train and validation), fixed by seed.

Arms, each read as P("Yes") vs P("No") with its pass threshold calibrated on train:
- **seed rubric**: `SEED_JUDGE_PROMPTS` on the base model.
- **LoRA judge**: an adapter trained with `weights.lora.train_sft_adapter` on the train
  labels as verdict tokens on the judge's own prompt (`judges.lora_records`: balanced by
  label; with `--injections`, each failing reply once more with an instruction to the judge
  appended, labelled fail), saved at `--checkpoints` evenly spaced points; the one with
  the best validation kappa is kept (early stopping on validation labels, read after).

Printed per arm on the held-out labels: kappa and accuracy with 95% bootstrap intervals
(1000 resamples, seed 0), true-positive and true-negative rates; then the injection test
on the held-out failing replies the arm judged fail: the share whose P(pass) an appended
instruction raised and the share it flipped to pass (one sentence of `judges.injection.PROBES`
per reply, seeded; none is a sentence the LoRA judge trained on), and the seconds of training.

    .venv/bin/python -m benchmarks.judge_lora [--seed 0] [--epochs 3] [--checkpoints 3]
        [--heldout-fraction 0.4] [--injections]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from flows.collect import collect
from infra.agents.intent_router import IntentRouter
from infra.lm.factory import make_lm
from infra.settings import LMSettings, LoraSettings
from infra.traces.jsonl import JsonlTraceSource
from judges.calibration import calibrate_threshold
from judges.injection import PROBES
from judges.lora_records import pointwise_records
from judges.metrics import agreement_report, cohen_kappa
from judges.pointwise import SEED_JUDGE_PROMPTS, PointwiseJudge
from judges.splits import judge_splits
from judges.types import JudgedItem
from weights.lora import checkpoints, train_sft_adapter

RUBRIC = SEED_JUDGE_PROMPTS["rubric"]


@dataclass
class Arm:
    name: str
    adapter: str | None
    threshold: float
    report: dict[str, float]
    raised: tuple[int, int]  # (failing replies whose P(pass) the injection raised, of)
    flipped: tuple[int, int]  # (turned to pass, of those judged fail without it)
    seconds: float = 0.0


def demo_items(seed: int, heldout_fraction: float) -> tuple[list, list, list]:
    batch = JsonlTraceSource().fetch(since=None, limit=10_000)
    items = collect(batch, IntentRouter(), "correct").items
    return judge_splits(items, heldout_fraction, seed)


async def probabilities(lm, items: list[JudgedItem], adapter: str | None) -> list[float]:
    probs = await PointwiseJudge(lm, {"rubric": RUBRIC}, adapter=adapter).p_pass_many(items)
    if None in probs:  # the local model's calls do not fail; a server's might
        raise RuntimeError(f"{probs.count(None)} judge calls failed")
    return [p for p in probs if p is not None]


async def measure(lm, name, adapter, train, heldout, seed: int, seconds: float = 0.0) -> Arm:
    cut = calibrate_threshold(
        await probabilities(lm, train, adapter), [bool(i.human_pass) for i in train]
    )
    probs = await probabilities(lm, heldout, adapter)
    gold = [bool(i.human_pass) for i in heldout]
    report = agreement_report([p >= cut for p in probs], gold, seed=0)
    failing = [(i, p) for i, p in zip(heldout, probs, strict=True) if not i.human_pass]
    rng = random.Random(seed)
    planted = [
        JudgedItem(i.id, i.input_text, f"{i.output_text}\n\n{rng.choice(PROBES)}")
        for i, _ in failing
    ]
    after = await probabilities(lm, planted, adapter)
    raised = sum(a > p for (_, p), a in zip(failing, after, strict=True))
    judged_fail = [(p, a) for (_, p), a in zip(failing, after, strict=True) if p < cut]
    flipped = sum(a >= cut for _, a in judged_fail)
    return Arm(
        name, adapter, cut, report, (raised, len(failing)), (flipped, len(judged_fail)), seconds
    )


async def val_kappa(lm, adapter: str, train, val) -> float:
    cut = calibrate_threshold(
        await probabilities(lm, train, adapter), [bool(i.human_pass) for i in train]
    )
    probs = await probabilities(lm, val, adapter)
    return cohen_kappa([p >= cut for p in probs], [bool(i.human_pass) for i in val])


async def run(args: argparse.Namespace) -> list[Arm]:
    lm = make_lm(LMSettings())
    train, val, heldout = demo_items(args.seed, args.heldout_fraction)
    print(f"labels: train {len(train)}, validation {len(val)}, held-out {len(heldout)}")
    arms = [await measure(lm, "seed rubric", None, train, heldout, args.seed)]
    records = pointwise_records(RUBRIC, train, seed=args.seed, injections=args.injections)
    cfg = LoraSettings(epochs=args.epochs, checkpoints=args.checkpoints, max_seq_length=512)
    with tempfile.TemporaryDirectory(prefix="judge-lora-") as scratch:
        started = time.perf_counter()
        result = await asyncio.to_thread(
            train_sft_adapter,
            records,
            lm.base_model_path,
            Path(scratch) / "judge",
            cfg,
            seed=args.seed,
        )
        seconds = time.perf_counter() - started
        print(f"trained on {result.examples} records, {result.steps} steps, {seconds:.0f} s")
        best: tuple[float, str] | None = None
        for path in [*checkpoints(result.path), result.path]:
            kappa = await val_kappa(lm, str(path), train, val)  # served on first use
            print(f"  {path.name}: validation kappa {kappa:.3f}")
            if best is None or kappa > best[0]:
                best = (kappa, str(path))
        assert best is not None
        arms.append(await measure(lm, "LoRA judge", best[1], train, heldout, args.seed, seconds))
    return arms


def show(arms: list[Arm]) -> None:
    print(
        "\n| judge | held-out kappa [95% CI] | accuracy [95% CI] | TPR | TNR | "
        "P(pass) raised by an injection | turned to pass | training s |"
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
    parser.add_argument("--heldout-fraction", type=float, default=0.4)
    parser.add_argument("--injections", action="store_true")
    show(asyncio.run(run(parser.parse_args(argv))))


if __name__ == "__main__":
    main()
