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
calibrated on train for the seed rubric and for GEPA's best (after each judge's position
lean, `judges.pairwise.position_lean`, is fitted on train without labels and taken off
both orders), and val kappa at that reading decides which one is kept (the seed stays
unless the best beats it). Held-out items are only ever reported.

LoRA judges (`benchmarks/pairwise_lora.py`, issue 18): the same pairwise judge with an
adapter of its own, trained on the training items in both orders with the letter swapped
(`judges.lora_records.pairwise_records`), the night's judge LoRA settings for `--lora-epochs`
epochs; each checkpoint's lean and threshold are fitted on train, the best on val kappa is
kept.
Arms: "LoRA judge" on the seed rubric, and "aligned rubric + LoRA judge" on each rubric
alignment chose instead of the seed (when it kept the seed, that arm is the first).
With `--reward-model`, a reward model (`benchmarks/pairwise_reward.py`) scores each
answer on its own with a Bradley-Terry head trained on the same training items, so it
has no order to flip.

MLflow (`benchmarks/mlflow_judge.py`): `make_judge` with the same rubric, question and
answers, `feedback_value_type=Literal["A", "B"]`, and `judge.align(traces,
GEPAAlignmentOptimizer(...))` on train + val logged as traces with HUMAN feedback (MLflow
takes one list and uses it as both GEPA sets) in a temporary sqlite store; same model
(served by `flywheel serve-model` on a localhost port for this run), same budget, seed,
minibatch and W. Its verdict is its reply in the original order; a reply that does not
parse is "unparseable" and counts as a disagreement.

Printed per judge on the held-out items: accuracy and Cohen's kappa against the human
preference, the position-flip rate (share of items whose verdict changes when the
answers are swapped, each order read on its own: at 0.5 with the lean taken off for
flywheel, as the reply for MLflow; over items where both orders gave a verdict),
flywheel's raw flip rate (each order at 0.5 with no lean: the model's own position
bias), each with a 95% bootstrap interval (1000 resamples, seed 0); unparseable calls;
the metric calls (flywheel: GEPA's count; MLflow: judge model calls during judge.align)
and the wall time of alignment (flywheel: search + threshold fit + choice; MLflow:
judge.align; LoRA arms: training).

    .venv/bin/python -m benchmarks.judge_alignment [--budget 120] [--seeds 0] [--workers 8]
        [--max-answer-chars 1200] [--heldout-fraction 0.3] [--val-fraction 0.15]
        [--split-seed 0] [--minibatch 3] [--no-mlflow] [--no-lora]
        [--reward-model] [--lora-epochs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
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
from benchmarks.pairwise_lora import LoraArm, Split, lora_arm
from benchmarks.pairwise_reward import reward_arm
from benchmarks.pairwise_scoring import (
    Agreement,
    Fit,
    VerdictCache,
    agreement,
    heldout_agreement,
)
from flows.plumbing.environment import prepare_environment
from gepa_opt import EvaluationBatch, GEPAConfig, optimize
from infra.lm import LM
from infra.lm.reflection import reflection_lm
from infra.settings import JudgeLoraSettings, JudgeSettings, Settings
from judges.pairwise import SEED_PAIRWISE_PROMPTS
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
    fit: Fit  # the chosen judge's lean and threshold
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


@dataclass
class SeedJudge:
    fit: Fit
    heldout: Agreement


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

    log("... flywheel: lean and threshold on train, choice on val")
    judged_before = len(cache.verdicts)
    seed_fit = await cache.fit(lm, seed_prompts, train, val, args.eval_chunk)
    best_fit = (
        await cache.fit(lm, best, train, val, args.eval_chunk) if best != seed_prompts else seed_fit
    )
    kept_seed = best != seed_prompts and best_fit.val_kappa <= seed_fit.val_kappa
    chosen, fit = (seed_prompts, seed_fit) if kept_seed else (best, best_fit)
    wall = time.monotonic() - start
    fit_calls = len(cache.verdicts) - judged_before

    log(f"... flywheel: held-out ({len(heldout)} items)")
    seed_verdicts = await cache.judge(lm, seed_prompts, heldout, args.eval_chunk)
    chosen_verdicts = await cache.judge(lm, chosen, heldout, args.eval_chunk)
    run = OurRun(
        seed=seed,
        prompts=chosen,
        fit=fit,
        kept_seed=kept_seed,
        best_differs=best != seed_prompts,
        val_kappa=best_fit.val_kappa,
        seed_val_kappa=seed_fit.val_kappa,
        metric_calls=result.metric_calls_used,
        proposals=result.reflection_calls,
        accepted=len(result.candidates) - 1,
        fit_calls=fit_calls,
        wall_s=wall,
        heldout=heldout_agreement(chosen_verdicts, fit, heldout),
    )
    return SeedJudge(seed_fit, heldout_agreement(seed_verdicts, seed_fit, heldout)), run


async def lora_arms(
    lm: LM, split: Split, ours: list[OurRun], cache: VerdictCache, args: argparse.Namespace
) -> list[LoraArm]:
    """The LoRA judge on the seed rubric, then on each rubric alignment chose instead, then
    the reward model where asked."""
    cfg = JudgeLoraSettings(epochs=args.lora_epochs, max_seq_length=args.lora_max_seq_length)
    aligned = [
        (f"aligned rubric + LoRA judge, seed {run.seed}", run.prompts, run.seed)
        for run in ours
        if run.prompts != SEED_PAIRWISE_PROMPTS
    ]
    seed_rubric = ("LoRA judge (seed rubric)", dict(SEED_PAIRWISE_PROMPTS), 0)
    rubrics = [] if args.no_lora else [seed_rubric, *aligned]
    arms = []
    with tempfile.TemporaryDirectory(prefix="flywheel-bench-judge-lora-") as scratch:
        for n, (name, prompts, seed) in enumerate(rubrics):
            log(f"... {name}: training")
            folder = Path(scratch) / f"arm-{n}"
            arms.append(
                await lora_arm(
                    lm, name, prompts, split, cache, cfg.training(), folder, seed, args.eval_chunk
                )
            )
    if args.reward_model:
        log("... reward model: training")
        # one answer a record: the longest question and answer at 1200 characters fit
        half = {"max_seq_length": args.lora_max_seq_length // 2}
        arms.append(await reward_arm(lm, split, cfg.training().model_copy(update=half), seed=0))
    return arms


# ---------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------

HEADER = (
    f"{'judge':<40} {'accuracy [95% CI]':<22} {'kappa [95% CI]':<23} "
    f"{'flip rate [95% CI]':<22} {'raw flip [95% CI]':<22} {'unparseable':>11} "
    f"{'metric calls':>12} {'align s':>8}"
)


def row(name: str, a: Agreement, calls: str = "-", wall: str = "-") -> str:
    flip = str(a.flip) if a.flip_n == a.n else f"{a.flip} (n={a.flip_n})"
    raw = "-" if a.raw_flip is None else str(a.raw_flip)
    unparseable = f"{a.unparseable_calls}/{a.calls}"
    return (
        f"{name:<40} {a.accuracy!s:<22} {a.kappa!s:<23} {flip:<22} {raw:<22} "
        f"{unparseable:>11} {calls:>12} {wall:>8}"
    )


def reading(fit: Fit) -> str:
    return f"position lean {fit.lean:+.3f} logits, threshold {fit.threshold:.3f}"


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
    parser.add_argument("--no-lora", action="store_true", help="skip the LoRA judge arms")
    parser.add_argument(
        "--reward-model", action="store_true", help="add the reward-model arm (trl RewardTrainer)"
    )
    parser.add_argument("--lora-epochs", type=int, default=JudgeLoraSettings().epochs)
    parser.add_argument(
        "--lora-max-seq-length",
        type=int,
        default=1152,
        help="tokens per training record (the longest pair at 1200 characters is ~1070)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    prepare_environment(Path(tempfile.mkdtemp(prefix="flywheel-bench-judge-")))
    from infra.lm.engine.local import LocalLM  # torch and transformers: after the environment

    began = time.monotonic()
    items = truncate_answers(load()[: args.max_items], args.max_answer_chars)
    split = split_by_question(items, args.heldout_fraction, args.split_seed, args.val_fraction)
    train, val, heldout = split
    settings = Settings().judge_model  # FLYWHEEL_JUDGE_LM__MODEL_PATH: a larger judge
    print(
        f"MT-Bench human preferences: {len(train)} train / {len(val)} val / {len(heldout)} "
        f"held-out items, split by question (split seed {args.split_seed}); every answer "
        f"truncated to {args.max_answer_chars} characters. "
        f"Model {settings.model_path or 'the embedded one'} (local). "
        f"Budget {args.budget} metric calls, W={args.workers}, minibatch {args.minibatch}, "
        f"GEPA seeds {args.seeds}.",
        flush=True,
    )

    lm = LocalLM(settings)
    cache = VerdictCache()

    async def all_seeds() -> tuple[list[tuple[SeedJudge, OurRun]], list[LoraArm]]:
        runs = [await run_ours(lm, split, args, seed, cache) for seed in args.seeds]
        arms = await lora_arms(lm, split, [r for _, r in runs], cache, args)
        return runs, arms

    try:
        runs, arms = asyncio.run(all_seeds())
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
            model_path=settings.model_path,
        )
        mlflow = run_mlflow(
            train + val, heldout, SEED_PAIRWISE_PROMPTS["rubric"], mlflow_settings, log
        )

    print(f"\nHeld-out agreement with the human preference ({len(heldout)} items):")
    print(HEADER)
    print(row(f"flywheel seed (threshold {seed_judge.fit.threshold:.3f})", seed_judge.heldout))
    for run in ours:
        same = run.prompts == SEED_PAIRWISE_PROMPTS
        name = f"flywheel aligned, seed {run.seed}" + (" (=seed)" if same else "")
        print(row(name, run.heldout, str(run.metric_calls), f"{run.wall_s:.0f}"))
    for arm in arms:
        print(row(arm.name, arm.heldout, "-", f"{arm.train_s:.0f}"))
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
            f"{run.seed_val_kappa:.3f}); {reading(run.fit)}; {run.fit_calls} items judged "
            f"beyond GEPA's calls for the fits and the choice; rubric: "
            f"{run.prompts['rubric'][:300]!r}"
        )
    for arm in arms:
        print(
            f"- {arm.name}: {arm.trained_on} of {arm.records} records ({arm.record}) "
            f"trained, {arm.steps} steps in {arm.train_s:.0f} s; validation "
            "kappa per checkpoint "
            + ", ".join(f"{name} {kappa:.3f}" for name, kappa in arm.checkpoints.items())
            + f"; kept {arm.kept}, {reading(arm.fit)}"
        )
    for run in ours:
        if not args.no_lora and run.prompts == SEED_PAIRWISE_PROMPTS:
            print(
                f"- aligned rubric + LoRA judge, seed {run.seed}: alignment kept the seed "
                "rubric, so it is the LoRA judge above"
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
