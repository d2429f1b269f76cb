"""How a judge gains with labels, read on a held-out set large enough to tell.

The pool is the demo's 376 annotations and the 280 exchanges of
`benchmarks/data/router_labels/` the demo does not hold (the same router and stand-in
annotator on other SNIPS requests, `scripts/build_router_labels.py`; the demo's week-before
traffic is 210 of its 490). A seeded shuffle keeps the first `--heldout`
(256) aside; a size n takes the first n of the rest, nested, 60% to train (the memory, and
what a trained judge fits) and 40% to validation, as the night splits its labels; a trained
judge's cut is calibrated on both, the night's rule.

Per size: the naming rule and resemblance (no LM, `judge_baselines`), the reward head
reading 3 notes (`--reward-head`, `reward_trainer`: minutes), and the night's judge, the
verdict-token LoRA judge with a memory on the router's rubric (`--lora`: about 22 minutes
at 100 labels on 2 cores, growing with the labels).

    .venv/bin/python -m benchmarks.judge_label_scale [--sizes 100 200 400] [--heldout 256]
        [--reward-head] [--lora]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import tempfile
from pathlib import Path

from benchmarks.judge_baselines import naming_baseline, resemblance_baseline
from benchmarks.judge_lora import demo_items, lora_arm, reward_head_arm
from benchmarks.judge_model import judge_lm
from infra.agents.intent_router import JUDGE_RUBRIC
from infra.settings import JudgeLoraSettings
from judges.types import JudgedItem

DATA = Path(__file__).parent / "data" / "router_labels" / "labels.jsonl"
NOTES = 3  # the night's judge.lora.memory
FIELDS = ["id", "request", "reply", "passed", "comment"]  # a shipped row's, besides its intent
TRAIN_SHARE = 0.6  # of a size's labels; the rest is validation, as the night splits them


def router_rows(path: Path = DATA) -> list[dict]:
    """The shipped labelled exchanges as written (with each request's gold `intent`); a
    malformed line is named with its field."""
    rows = []
    for n, line in enumerate(path.read_text().splitlines(), start=1):
        try:
            row = json.loads(line)
        except ValueError as err:
            raise ValueError(f"{path}:{n}: not a labelled exchange ({err!r})") from err
        missing = [f for f in FIELDS if f not in row] if isinstance(row, dict) else FIELDS
        if missing:
            raise ValueError(f"{path}:{n}: not a labelled exchange (no field {missing[0]!r})")
        if not isinstance(row["passed"], bool):
            raise ValueError(f"{path}:{n}: field 'passed' must be true or false")
        rows.append(row)
    return rows


def router_labels(path: Path = DATA) -> list[JudgedItem]:
    """The shipped labelled exchanges, as the judges read them."""
    return [
        JudgedItem(r["id"], r["request"], r["reply"], r["passed"], r["comment"])
        for r in router_rows(path)
    ]


def label_pool(heldout_size: int) -> tuple[list[JudgedItem], list[JudgedItem]]:
    """(held-out, the rest to draw labels from): the demo's labels and the shipped ones it
    does not hold (its older traffic is made of some), shuffled by a fixed seed."""
    train, val, heldout = demo_items(0, 0.4)
    demo = train + val + heldout
    held = {item.input_text for item in demo}
    pool = demo + [item for item in router_labels() if item.input_text not in held]
    random.Random(0).shuffle(pool)
    if heldout_size >= len(pool):
        raise ValueError(f"--heldout {heldout_size} leaves none of {len(pool)} labels to learn")
    return pool[:heldout_size], pool[heldout_size:]


def sized(rest: list[JudgedItem], n: int) -> tuple[list[JudgedItem], list[JudgedItem]]:
    """The first n labels, `TRAIN_SHARE` to train and the rest to validation."""
    if n > len(rest):
        raise ValueError(f"{len(rest)} labels to learn from, not {n}")
    labelled, cut = rest[:n], round(TRAIN_SHARE * n)
    return labelled[:cut], labelled[cut:]


def arm_args() -> argparse.Namespace:
    """The night's recipe, as `judge_lora`'s arms read it."""
    cfg = JudgeLoraSettings()
    return argparse.Namespace(
        seed=0,
        epochs=cfg.epochs,
        checkpoints=cfg.checkpoints,
        learning_rate=cfg.learning_rate,
        injections=True,
        mismatched=False,
        probs=None,
        head_memory=NOTES,
    )


async def row(lm, n: int, heldout, rest, reward_head: bool, lora: bool) -> dict[str, float]:
    """Held-out kappa of each judge given n labels."""
    train, val = sized(rest, n)
    kappas = {
        "naming rule": naming_baseline(heldout),
        "resemblance": resemblance_baseline(train, val, heldout, NOTES),
    }
    if reward_head:
        arm = await reward_head_arm(lm, train, val, heldout, arm_args())
        kappas["reward head"] = arm.report["kappa"]
    if lora:
        with tempfile.TemporaryDirectory(prefix="judge-label-scale-") as scratch:
            name = f"LoRA judge with a memory ({NOTES} notes)"
            arm, _ = await lora_arm(
                lm,
                name,
                JUDGE_RUBRIC,
                train,
                val,
                heldout,
                arm_args(),
                Path(scratch) / "adapter",  # a folder the trainer makes: it never overwrites
                memory_k=NOTES,
            )
        kappas["LoRA judge"] = arm.report["kappa"]
    print(f"{n} labels: " + ", ".join(f"{k} {v:.3f}" for k, v in kappas.items()), flush=True)
    return kappas


def show(rows: dict[int, dict[str, float]], heldout: int) -> None:
    names = list(next(iter(rows.values())))
    print(f"\n| labels (train / validation), {heldout} held out | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for n, kappas in rows.items():
        train = round(TRAIN_SHARE * n)
        cells = " | ".join(f"{kappas[name]:.3f}" for name in names)
        print(f"| {n} ({train} / {n - train}) | {cells} |")


async def run(args: argparse.Namespace) -> dict[int, dict[str, float]]:
    heldout, rest = label_pool(args.heldout)
    passing = sum(bool(i.human_pass) for i in heldout)
    print(f"held-out: {len(heldout)} labels ({passing} pass); {len(rest)} to learn from")
    lm = judge_lm() if args.reward_head or args.lora else None
    return {n: await row(lm, n, heldout, rest, args.reward_head, args.lora) for n in args.sizes}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 200, 400])
    parser.add_argument("--heldout", type=int, default=256)
    parser.add_argument("--reward-head", action="store_true", help="add the reward head (notes)")
    parser.add_argument("--lora", action="store_true", help="add the night's LoRA judge (slow)")
    args = parser.parse_args(argv)
    show(asyncio.run(run(args)), args.heldout)


if __name__ == "__main__":
    main()
