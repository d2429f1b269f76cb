"""How judge agreement on the demo's labels grows with the number of labels, and how much
one split's held-out kappa varies: resemblance to reviewed replies
(`judge_baselines.remembered_baseline`, no LM, seconds per split) given 40 to 100 of a
split's 100 training and validation labels, over many splits, beside the naming rule.

A single split's 66 held-out labels measure kappa to about +-0.1, so a judge whose mean is
just above 0.6 falls below it on about half the splits; the spread printed here is that
noise (the splits overlap, so it is not an interval on the mean).

    .venv/bin/python -m benchmarks.judge_label_curve [--splits 30] [--sizes 40 60 80 100]
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable, Sequence
from statistics import fmean, pstdev

from benchmarks.judge_baselines import naming_baseline, remembered_baseline
from benchmarks.judge_lora import demo_items
from judges.types import JudgedItem

Splits = Callable[[int], tuple[list[JudgedItem], list[JudgedItem], list[JudgedItem]]]


def label_curve(
    splits: Splits, seeds: Sequence[int], sizes: Sequence[int], k: int
) -> dict[str, list[float]]:
    """Per row ("n labels" for each size, then the naming rule), held-out kappa on each
    split: n labels drawn from its training and validation ones (seeded by the split)."""
    rows: dict[str, list[float]] = {f"{n} labels": [] for n in sizes} | {"naming rule": []}
    for seed in seeds:
        train, val, heldout = splits(seed)
        known = train + val
        for n in sizes:
            if n > len(known):
                raise ValueError(f"split {seed} has {len(known)} labels to learn from, not {n}")
            drawn = random.Random(seed).sample(known, n)
            rows[f"{n} labels"].append(remembered_baseline(drawn, heldout, k))
        rows["naming rule"].append(naming_baseline(heldout))
    return rows


def show(rows: dict[str, list[float]], target: float) -> None:
    print(f"| held-out kappa | mean | sd across splits | min | splits at >= {target} |")
    print("|---|---|---|---|---|")
    for name, kappas in rows.items():
        reached = sum(k >= target for k in kappas)
        print(
            f"| {name} | {fmean(kappas):.3f} | {pstdev(kappas):.3f} | {min(kappas):.3f} "
            f"| {reached} / {len(kappas)} |"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--splits", type=int, default=30, help="splits 0..N-1")
    parser.add_argument("--first", type=int, default=0, help="the first split's seed")
    parser.add_argument("--sizes", type=int, nargs="+", default=[40, 60, 80, 100])
    parser.add_argument("--memory", type=int, default=3, help="notes per exchange (K)")
    parser.add_argument("--heldout-fraction", type=float, default=0.4)
    parser.add_argument("--target", type=float, default=0.6)
    args = parser.parse_args(argv)
    seeds = range(args.first, args.first + args.splits)
    rows = label_curve(
        lambda seed: demo_items(seed, args.heldout_fraction), seeds, args.sizes, args.memory
    )
    last = seeds.stop - 1
    print(f"resemblance to reviewed replies (K = {args.memory}), splits {seeds.start}-{last}")
    show(rows, args.target)


if __name__ == "__main__":
    main()
