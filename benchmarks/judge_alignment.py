"""Pairwise judge alignment on real human judgments: flywheel's vs MLflow's, on MT-Bench.

Data: the 162 MT-Bench items shipped in `benchmarks/data/llmbar_mtbench/` (expert human
preferences between two answers; see its README). Split by question with `--split-seed`
(`benchmarks/mtbench_data.split_by_question`): no question has items on two sides, so a
rubric tuned on one pair of answers is never scored on another pair of the same question.
Every answer is cut to `--max-answer-chars` characters (with a "[... N more characters]"
marker) before either judge sees it: the answers are long, and the local model prefills
every prompt on CPU.

Flywheel (`judges/`): the pairwise judge (`PairwiseJudge`) reads P("A") vs P("B") in both
orders and averages them, so a pure position bias cancels. Aligned with `gepa_opt.optimize`
on its rubric, with `PairwiseAlignmentAdapter` (per-item score: the probability given to
the human's answer, both labels weighted equally): train = reflective feedback, val =
Pareto set, `--budget` metric calls, W = `--workers` calls in flight, the local model as
reflection LM. Afterwards, as `judges/align.py` does: the verdict threshold on p_a is
calibrated on train for the seed rubric and for GEPA's best, and val kappa at that
threshold decides which one is kept (the seed stays unless the best beats it). Held-out
items are only ever reported.

MLflow (`benchmarks/mlflow_judge.py`): `make_judge` with the same rubric, question and
answers, `feedback_value_type=Literal["A", "B"]`, and `judge.align(traces,
GEPAAlignmentOptimizer(...))` on train + val logged as traces with HUMAN feedback (MLflow
takes one list and uses it as both GEPA sets) in a temporary sqlite store; same model
(served by `flywheel serve-model` on a localhost port for this run), same budget, seed,
minibatch and W. Its verdict is its reply in the original order; a reply that does not
parse is "unparseable" and counts as a disagreement.

Printed per judge on the held-out items: accuracy and Cohen's kappa against the human
preference, the position-flip rate (share of items whose verdict changes when the answers
are swapped, each order read on its own: at 0.5 for flywheel, as the reply for MLflow;
over items where both orders gave a verdict), each with a 95% bootstrap interval (1000
resamples, seed 0); unparseable calls; the metric calls (flywheel: GEPA's count; MLflow:
judge model calls during judge.align) and the wall time of alignment (flywheel: search +
threshold fit + choice; MLflow: judge.align).

    .venv/bin/python -m benchmarks.judge_alignment [--budget 120] [--seeds 0] [--workers 8]
        [--max-answer-chars 1200] [--heldout-fraction 0.3] [--val-fraction 0.15]
        [--split-seed 0] [--minibatch 3] [--no-mlflow]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.mlflow_judge import (
    MlflowResult,
    MlflowSettings,
    OrderVerdicts,
    first_line,
    run_mlflow,
)
from benchmarks.mtbench_data import load, split_by_question
from flows.environment import prepare_environment
from gepa_opt import EvaluationBatch, GEPAConfig, optimize
from infra.lm import LM
from infra.lm.reflection import reflection_lm
from infra.settings import JudgeSettings, LMSettings
from judges.calibration import calibrate_threshold
from judges.metrics import Estimate, accuracy, bootstrap, cohen_kappa, flip_rate
from judges.pairwise import SEED_PAIRWISE_PROMPTS, PairwiseJudge, PairwiseVerdict
from judges.pairwise_align import PairwiseAlignmentAdapter, clip, preference_weights
from judges.types import PairwiseItem, Preference

UNPARSEABLE = "unparseable"
PARSE_FAILURE = "Failed to parse response from judge model"  # MLflow's message


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------
# Pure pieces
# ---------------------------------------------------------------------------------------


def truncate_answers(items: Sequence[PairwiseItem], max_chars: int) -> list[PairwiseItem]:
    """Each answer cut to `max_chars` characters (a marker says how many were dropped)."""
    return [
        dataclasses.replace(
            item, answer_a=clip(item.answer_a, max_chars), answer_b=clip(item.answer_b, max_chars)
        )
        for item in items
    ]


@dataclass(frozen=True)
class Agreement:
    """Held-out agreement of one judge, with bootstrap intervals."""

    n: int
    accuracy: Estimate
    kappa: Estimate
    flip: Estimate
    flip_n: int  # items where both orders gave a verdict
    unparseable_calls: int
    calls: int


def agreement(
    pred: Sequence[str],
    gold: Sequence[Preference],
    first: Sequence[Preference | None],
    second: Sequence[Preference | None],
    seed: int = 0,
) -> Agreement:
    """Accuracy and kappa of `pred` (labels, or UNPARSEABLE) against `gold`; flip rate of
    the per-order verdicts over the items where neither order is None."""
    both = [(a, b) for a, b in zip(first, second, strict=True) if a is not None and b is not None]
    flip = (
        bootstrap(flip_rate, [a for a, _ in both], [b for _, b in both], seed=seed)
        if both
        else Estimate(None, None, None)
    )
    return Agreement(
        n=len(gold),
        accuracy=bootstrap(accuracy, list(pred), list(gold), seed=seed),
        kappa=bootstrap(cohen_kappa, list(pred), list(gold), seed=seed),
        flip=flip,
        flip_n=len(both),
        unparseable_calls=sum(v is None for v in (*first, *second)),
        calls=2 * len(gold),
    )


def single_order_verdicts(first: Sequence[Preference | None]) -> list[str]:
    """A one-order judge's verdicts: its reply, or UNPARSEABLE where it gave none."""
    return [UNPARSEABLE if v is None else v for v in first]


def order_agreement(verdicts: OrderVerdicts, gold: Sequence[Preference]) -> Agreement:
    """Agreement of a judge asked once per order (MLflow's): its verdict is the first."""
    first, second = verdicts.first, verdicts.second
    return agreement(single_order_verdicts(first), gold, first, second)


# ---------------------------------------------------------------------------------------
# Flywheel's judge
# ---------------------------------------------------------------------------------------


def _length(item: PairwiseItem) -> int:
    return len(item.question) + len(item.answer_a) + len(item.answer_b)


class VerdictCache:
    """p_a verdicts per (judge prompts, item id): GEPA's own evaluations are kept, so the
    threshold fit and the val choice do not pay again for what the search already read."""

    def __init__(self) -> None:
        self.verdicts: dict[tuple[str, str], PairwiseVerdict] = {}

    @staticmethod
    def key(prompts: dict[str, str], item: PairwiseItem) -> tuple[str, str]:
        return json.dumps(prompts, sort_keys=True), item.id

    async def judge(
        self, lm: LM, prompts: dict[str, str], items: list[PairwiseItem], chunk: int
    ) -> list[PairwiseVerdict]:
        """Verdicts for `items`, new ones in chunks of similar length: one batched forward of
        many long prompts padded to the longest is several times slower on CPU."""
        judge = PairwiseJudge(lm, prompts)
        new = {i.id: i for i in items if self.key(prompts, i) not in self.verdicts}
        todo = sorted(new.values(), key=_length)
        for start in range(0, len(todo), chunk):
            batch = todo[start : start + chunk]
            for item, verdict in zip(batch, await judge.verdicts(batch), strict=True):
                self.verdicts[self.key(prompts, item)] = verdict
        return [self.verdicts[self.key(prompts, item)] for item in items]


class CachingAdapter(PairwiseAlignmentAdapter):
    """The alignment adapter, keeping every verdict the search reads in `cache`."""

    def __init__(self, lm: LM, weights: dict[Preference, float], cache: VerdictCache):
        super().__init__(lm, weights)
        self.cache = cache

    async def evaluate(
        self, batch: list[PairwiseItem], candidate: dict[str, str], capture_traces: bool = False
    ) -> EvaluationBatch:
        result = await super().evaluate(batch, candidate, capture_traces)
        for item, verdict in zip(batch, result.outputs, strict=True):
            self.cache.verdicts.setdefault(self.cache.key(candidate, item), verdict)
        return result


@dataclass
class OurRun:
    seed: int
    prompts: dict[str, str]
    threshold: float
    kept_seed: bool
    best_differs: bool
    val_kappa: float
    seed_val_kappa: float
    metric_calls: int
    proposals: int  # reflection calls: rubrics GEPA proposed
    accepted: int  # of them, candidates that entered its pool
    fit_calls: int  # items judged (both orders) for thresholds and the choice, beyond GEPA's
    wall_s: float
    heldout: Agreement


def _heldout(
    verdicts: list[PairwiseVerdict], threshold: float, heldout: list[PairwiseItem]
) -> Agreement:
    pred = ["A" if v.p_a >= threshold else "B" for v in verdicts]
    first = ["A" if v.p_a_by_order[0] >= 0.5 else "B" for v in verdicts]
    second = ["A" if v.p_a_by_order[1] >= 0.5 else "B" for v in verdicts]
    return agreement(pred, [i.human_prefers for i in heldout], first, second)


@dataclass
class SeedJudge:
    threshold: float
    heldout: Agreement


Split = tuple[list[PairwiseItem], list[PairwiseItem], list[PairwiseItem]]


async def run_ours(
    lm: LM, split: Split, args: argparse.Namespace, seed: int, cache: VerdictCache
) -> tuple[SeedJudge, OurRun]:
    """The seed judge and the aligned one for one GEPA seed (the seed judge's verdicts come
    from the cache after the first seed)."""
    train, val, heldout = split
    seed_prompts = dict(SEED_PAIRWISE_PROMPTS)
    config = GEPAConfig(
        max_metric_calls=args.budget,
        reflection_minibatch_size=args.minibatch,
        max_concurrency=args.workers,
        seed=seed,
        skip_perfect_score=False,  # scores are probabilities: none is "perfect"
    )
    start = time.monotonic()
    log(f"... flywheel: gepa_opt on the rubric, seed {seed}, budget {args.budget}")
    result = await optimize(
        seed_prompts,
        train,
        val,
        CachingAdapter(lm, preference_weights(train + val), cache),
        reflection_lm(lm, JudgeSettings().reflection_max_tokens, seed),
        config,
        example_id=lambda item: item.id,
    )
    best = dict(result.best_candidate)

    async def fit(prompts: dict[str, str]) -> tuple[float, float]:
        """(threshold calibrated on train, kappa on val at that threshold)"""
        verdicts = await cache.judge(lm, prompts, train + val, args.eval_chunk)
        p_train = [v.p_a for v in verdicts[: len(train)]]
        threshold = calibrate_threshold(p_train, [i.human_prefers == "A" for i in train])
        pred = ["A" if v.p_a >= threshold else "B" for v in verdicts[len(train) :]]
        return threshold, cohen_kappa(pred, [i.human_prefers for i in val])

    log("... flywheel: threshold on train, choice on val")
    judged_before = len(cache.verdicts)
    seed_threshold, seed_kappa = await fit(seed_prompts)
    best_threshold, best_kappa = (
        await fit(best) if best != seed_prompts else (seed_threshold, seed_kappa)
    )
    kept_seed = best != seed_prompts and best_kappa <= seed_kappa
    chosen, threshold = (seed_prompts, seed_threshold) if kept_seed else (best, best_threshold)
    wall = time.monotonic() - start
    fit_calls = len(cache.verdicts) - judged_before

    log(f"... flywheel: held-out ({len(heldout)} items)")
    seed_verdicts = await cache.judge(lm, seed_prompts, heldout, args.eval_chunk)
    chosen_verdicts = await cache.judge(lm, chosen, heldout, args.eval_chunk)
    run = OurRun(
        seed=seed,
        prompts=chosen,
        threshold=threshold,
        kept_seed=kept_seed,
        best_differs=best != seed_prompts,
        val_kappa=best_kappa,
        seed_val_kappa=seed_kappa,
        metric_calls=result.metric_calls_used,
        proposals=result.reflection_calls,
        accepted=len(result.candidates) - 1,
        fit_calls=fit_calls,
        wall_s=wall,
        heldout=_heldout(chosen_verdicts, threshold, heldout),
    )
    return SeedJudge(seed_threshold, _heldout(seed_verdicts, seed_threshold, heldout)), run


# ---------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------

HEADER = (
    f"{'judge':<40} {'accuracy [95% CI]':<22} {'kappa [95% CI]':<23} "
    f"{'flip rate [95% CI]':<22} {'unparseable':>11} {'metric calls':>12} {'align s':>8}"
)


def row(name: str, a: Agreement, calls: str = "-", wall: str = "-") -> str:
    flip = str(a.flip) if a.flip_n == a.n else f"{a.flip} (n={a.flip_n})"
    unparseable = f"{a.unparseable_calls}/{a.calls}"
    return (
        f"{name:<40} {a.accuracy!s:<22} {a.kappa!s:<23} {flip:<22} {unparseable:>11} "
        f"{calls:>12} {wall:>8}"
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--budget", type=int, default=120, help="metric calls per alignment")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="GEPA seeds")
    parser.add_argument("--workers", type=int, default=8, help="W: LM calls in flight")
    parser.add_argument("--minibatch", type=int, default=3, help="reflection minibatch size")
    parser.add_argument("--max-answer-chars", type=int, default=1200)
    parser.add_argument("--heldout-fraction", type=float, default=0.3)
    parser.add_argument("--val-fraction", type=float, default=0.15)
    parser.add_argument("--split-seed", type=int, default=0)
    parser.add_argument(
        "--eval-chunk", type=int, default=16, help="items per batch outside the search"
    )
    parser.add_argument("--mlflow-judge-max-tokens", type=int, default=64)
    parser.add_argument("--max-items", type=int, help="only the first N items (a quick run)")
    parser.add_argument("--no-mlflow", action="store_true", help="skip MLflow's judge.align")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    prepare_environment(Path(tempfile.mkdtemp(prefix="flywheel-bench-judge-")))
    from infra.lm.local import LocalLM  # torch and transformers: after the environment

    began = time.monotonic()
    items = truncate_answers(load()[: args.max_items], args.max_answer_chars)
    split = split_by_question(items, args.heldout_fraction, args.split_seed, args.val_fraction)
    train, val, heldout = split
    settings = LMSettings()
    print(
        f"MT-Bench human preferences: {len(train)} train / {len(val)} val / {len(heldout)} "
        f"held-out items, split by question (split seed {args.split_seed}); every answer "
        f"truncated to {args.max_answer_chars} characters. Model {settings.model} (local). "
        f"Budget {args.budget} metric calls, W={args.workers}, minibatch {args.minibatch}, "
        f"GEPA seeds {args.seeds}.",
        flush=True,
    )

    lm = LocalLM(settings)
    cache = VerdictCache()

    async def all_seeds() -> list[tuple[SeedJudge, OurRun]]:
        return [await run_ours(lm, split, args, seed, cache) for seed in args.seeds]

    try:
        runs = asyncio.run(all_seeds())
        seed_judge, ours = runs[0][0], [run for _, run in runs]
    finally:
        lm.close()  # frees the cores for the server MLflow's path starts

    mlflow = None
    if not args.no_mlflow:
        mlflow_settings = MlflowSettings(
            model_name=settings.model,
            seeds=args.seeds,
            budget=args.budget,
            minibatch=args.minibatch,
            workers=args.workers,
            judge_max_tokens=args.mlflow_judge_max_tokens,
        )
        mlflow = run_mlflow(
            train + val, heldout, SEED_PAIRWISE_PROMPTS["rubric"], mlflow_settings, log
        )

    print(f"\nHeld-out agreement with the human preference ({len(heldout)} items):")
    print(HEADER)
    print(row(f"flywheel seed (threshold {seed_judge.threshold:.3f})", seed_judge.heldout))
    for run in ours:
        same = run.prompts == SEED_PAIRWISE_PROMPTS
        name = f"flywheel aligned, seed {run.seed}" + (" (=seed)" if same else "")
        print(row(name, run.heldout, str(run.metric_calls), f"{run.wall_s:.0f}"))
    gold = [i.human_prefers for i in heldout]
    if mlflow is not None and mlflow.seed_heldout is not None:
        print(row("MLflow seed", order_agreement(mlflow.seed_heldout, gold)))
        for mrun in mlflow.runs:
            name = f"MLflow judge.align GEPA, seed {mrun.seed}" + (
                "" if mrun.changed else " (=seed)"
            )
            calls, wall = str(mrun.judge_calls.calls), f"{mrun.wall_s:.0f}"
            print(row(name, order_agreement(mrun.heldout, gold), calls, wall))
    if mlflow is not None and mlflow.failure is not None:
        print(f"{'MLflow judge.align GEPA':<40} failed at: {mlflow.failure.step} (see notes)")

    print("\nNotes:")
    for run in ours:
        what = (
            "GEPA found no better rubric; the seed is used"
            if not run.best_differs
            else "GEPA's best lost to the seed on val kappa; the seed is kept"
            if run.kept_seed
            else "GEPA's best is used"
        )
        print(
            f"- flywheel seed {run.seed}: {run.proposals} rubrics proposed, {run.accepted} "
            f"accepted into the pool; {what} (val kappa best {run.val_kappa:.3f} vs seed "
            f"{run.seed_val_kappa:.3f}); threshold {run.threshold:.3f}; {run.fit_calls} items "
            f"judged beyond GEPA's calls for the thresholds and the choice; rubric: "
            f"{run.prompts['rubric'][:300]!r}"
        )
    if mlflow is not None:
        report_mlflow(mlflow)
    print(f"- whole benchmark: {time.monotonic() - began:.0f} s wall")


def report_mlflow(result: MlflowResult) -> None:
    print(
        f"- MLflow: judge model {result.model_uri} at the local server; "
        f"{result.n_traces} training traces; timings "
        + ", ".join(f"{name} {s:.0f} s" for name, s in result.timings.items())
    )
    if result.seed_heldout is not None and result.seed_heldout.errors:
        errors = result.seed_heldout.errors
        print(
            f"- MLflow seed judge: {len(errors)} of {2 * len(result.seed_heldout.first)} "
            f"held-out calls gave no verdict; first: {errors[0]}"
        )
    for run in result.runs:
        calls = run.judge_calls
        print(
            f"- MLflow judge.align seed {run.seed}: {calls.calls} judge calls during the search, "
            f"{calls.failures} failed"
            + (f" (first: {calls.first_failure})" if calls.failures else "")
        )
        if calls.calls and calls.failures == calls.calls:
            print(
                "  every judge call of the search failed, so DSPy's GEPA had no successful "
                "trajectory to reflect on"
            )
        if not run.changed:
            print(
                "  its instructions came back unchanged: GEPA proposed no candidate it kept, "
                "so its held-out row is the seed judge's"
            )
        else:
            print(f"  aligned instructions: {run.instructions[:300]!r}")
    failures = list(result.seed_heldout.errors) if result.seed_heldout else []
    failures += [r.judge_calls.first_failure or "" for r in result.runs]
    if any(PARSE_FAILURE in e for e in failures):
        print(
            '  why: MLflow\'s judge asks the model for a JSON object {"result": ..., '
            '"rationale": ...} (it sends a response_format JSON schema, which the local '
            "server does not enforce) and raises when the reply does not parse as JSON; the "
            "local model answers in free text"
        )
    if result.failure is not None:
        failure = result.failure
        print(f"- MLflow's path FAILED at step '{failure.step}': {first_line(failure.cause)}")


if __name__ == "__main__":
    main()
