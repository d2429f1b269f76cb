"""The nightly stages as plain async functions: importable and testable without Prefect.

Each takes the runtime and plain data and returns a small, picklable result, so that
Prefect can persist it and a failed night resumes without redoing finished stages.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from statistics import fmean
from typing import Any

from flows.judge_in_use import JudgeInUse
from flows.runtime import Runtime
from gepa_opt import GEPAConfig, optimize
from infra.lm.model_files import resolve_model_path
from infra.lm.reflection import reflection_lm
from infra.lm.threads import run_in_own_thread
from infra.settings import GEPASettings
from infra.types import Example, Rollout
from judges.agent_metric import AgentJudgeAdapter, judge_rollouts
from judges.align import align_judge
from judges.pointwise import SEED_JUDGE_PROMPTS, PointwiseJudge
from judges.scaled import ScaledJudge
from judges.scaled_align import align_scaled_judge, primary_metric
from judges.scaled_metric import PASS_CUT, ScaledMetric
from judges.scales import ScoreScale
from judges.splits import stratified_split
from judges.types import JudgedItem
from weights.adapters import adapter_files_ok
from weights.datasets import sft_records
from weights.lora import train_sft_adapter

OnEvent = Callable[[Any], None] | None


@dataclass
class JudgeStage:
    prompts: dict[str, str]
    threshold: float  # the pass cut: calibrated on P(pass) for pass/fail, else PASS_CUT
    heldout: dict[str, float]  # agreement on held-out labels, keys by the scale
    seed_prompts: dict[str, str]
    seed_threshold: float
    seed_heldout: dict[str, float]
    val_score: float  # the primary statistic of GEPA's best rubric on validation labels
    seed_val_score: float
    kept_seed: bool  # GEPA's best did not agree better on validation labels
    metric_calls: int
    sizes: dict[str, int]
    curve: list[tuple[int, float]] = field(default_factory=list)  # (metric calls, best val)
    floor: float = 0.2  # judge.min_kappa, on the primary statistic
    scale: ScoreScale = ScoreScale("boolean")  # the annotation's, which the judge answers on
    unparseable: int = 0  # verdicts the search scored 0, unreadable (pass/fail reads P(yes))

    @property
    def primary(self) -> str:
        """The agreement statistic that chose and gates this judge, e.g. "kappa"."""
        return primary_metric(self.scale)

    @property
    def heldout_score(self) -> float:
        return self.heldout.get(self.primary, 0.0)

    @property
    def trusted(self) -> bool:
        """Whether this judge clears the floor (the gate also compares it with the judge
        in use; `flows.judge_gate`)."""
        return self.heldout_score >= self.floor


@dataclass
class PromptStage:
    prompts: dict[str, str]
    seed_val: float
    best_val: float
    metric_calls: int
    reflection_calls: int
    candidates: int
    curve: list[tuple[int, float]] = field(default_factory=list)  # (metric calls, best val)
    judge_unparseable: int = 0  # the metric judge's verdicts the search could not read


@dataclass
class LoraStage:
    trained_path: str | None  # the adapter this round trained, if it trained one
    kept: bool  # whether the judge preferred it on the Pareto set
    records: int
    train_loss: float | None
    val_without: float
    val_with: float | None
    note: str = ""

    @property
    def adapter_path(self) -> str | None:
        """The adapter that goes into the registered version, if any."""
        return self.trained_path if self.kept else None


@dataclass
class Evaluation:
    n: int
    accuracy: float | None  # against true labels, when the examples have them
    judge_pass_rate: float


def gepa_config(cfg: GEPASettings, seed: int, **overrides: Any) -> GEPAConfig:
    return GEPAConfig(
        max_metric_calls=cfg.max_metric_calls,
        reflection_minibatch_size=cfg.reflection_minibatch_size,
        max_concurrency=cfg.max_concurrency,
        proposal_shape=cfg.proposal_shape,
        seed=seed,
        **overrides,
    )


def judge_splits(
    rt: Runtime, items: list[JudgedItem]
) -> tuple[list[JudgedItem], list[JudgedItem], list[JudgedItem]]:
    """(train, val, held-out), fixed by seed: the gate re-measures the judge in use on the
    very held-out items the new judge was measured on."""
    cfg, seed = rt.settings.judge, rt.settings.agent_opt.seed
    selection, heldout = stratified_split(items, cfg.heldout_fraction, seed)
    train, val = stratified_split(selection, 0.4, seed + 1)
    return train, val, heldout


async def align_judge_stage(
    rt: Runtime, items: list[JudgedItem], scale: ScoreScale, on_event: OnEvent = None
) -> JudgeStage:
    """Pass/fail: a calibrated threshold on P(pass) (`judges.align`); any other scale:
    the judge answers on it (`judges.scaled_align`)."""
    cfg, seed = rt.settings.judge, rt.settings.agent_opt.seed
    train, val, heldout = judge_splits(rt, items)
    config = gepa_config(cfg, seed, skip_perfect_score=False)
    reflect = reflection_lm(rt.reflection_lm, cfg.reflection_max_tokens, seed)
    seed_prompts = dict(SEED_JUDGE_PROMPTS)
    if scale.kind == "boolean":
        aligned = await align_judge(
            rt.lm, seed_prompts, train, val, heldout, config, reflect, on_event
        )
        thresholds = aligned.threshold, aligned.seed_threshold
        val_scores = aligned.val_kappa, aligned.seed_val_kappa
        unparseable = 0
    else:
        aligned = await align_scaled_judge(
            rt.lm, seed_prompts, scale, train, val, heldout, config, reflect, on_event
        )
        thresholds = PASS_CUT, PASS_CUT
        val_scores = aligned.val_score, aligned.seed_val_score
        unparseable = aligned.unparseable
    return JudgeStage(
        prompts=aligned.prompts,
        threshold=thresholds[0],
        heldout=aligned.heldout,
        seed_prompts=seed_prompts,
        seed_threshold=thresholds[1],
        seed_heldout=aligned.seed_heldout,
        val_score=val_scores[0],
        seed_val_score=val_scores[1],
        kept_seed=aligned.kept_seed,
        metric_calls=aligned.metric_calls,
        floor=cfg.min_kappa,
        sizes={"train": len(train), "val": len(val), "heldout": len(heldout)},
        scale=scale,
        unparseable=unparseable,
    )


def judge_of(rt: Runtime, judge: JudgeInUse) -> PointwiseJudge | ScaledMetric:
    """The judge as the agent's metric: P(pass) for pass/fail, else its verdict placed in
    [0, 1] on the scale's order."""
    max_tokens = rt.settings.judge.rationale_max_tokens
    if judge.scale.kind == "boolean":
        return PointwiseJudge(rt.lm, judge.prompts, judge.threshold, max_tokens)
    return ScaledMetric(ScaledJudge(rt.lm, judge.prompts, judge.scale), max_tokens)


def split_examples(rt: Runtime, examples: list[Example]) -> tuple[list[Example], list[Example]]:
    """(trainset, valset): the Pareto set is a fixed, seeded sample of the traffic."""
    shuffled = sorted(examples, key=lambda e: e.id)
    random.Random(rt.settings.agent_opt.seed).shuffle(shuffled)
    size = min(rt.settings.agent_opt.pareto_size, len(shuffled) // 2)
    return shuffled[size:], shuffled[:size]


async def optimize_prompts_stage(
    rt: Runtime,
    examples: list[Example],
    seed_prompts: dict[str, str],
    judge: JudgeInUse,
    on_event: OnEvent = None,
) -> PromptStage:
    cfg = rt.settings.agent_opt
    trainset, valset = split_examples(rt, examples)
    metric = judge_of(rt, judge)
    adapter = AgentJudgeAdapter(rt.agent, rt.lm, metric, max_tokens=cfg.max_tokens, temperature=0.0)
    config = gepa_config(cfg, cfg.seed)
    result = await optimize(
        seed_prompts,
        trainset,
        valset,
        adapter,
        reflection_lm(rt.reflection_lm, cfg.reflection_max_tokens, cfg.seed),
        config,
        example_id=lambda ex: ex.id,
        on_event=on_event,
    )
    return PromptStage(
        prompts=dict(result.best_candidate),
        seed_val=result.val_aggregate_scores[0],
        best_val=result.val_aggregate_scores[result.best_idx],
        metric_calls=result.metric_calls_used,
        reflection_calls=result.reflection_calls,
        candidates=len(result.candidates),
        judge_unparseable=metric.unparseable if isinstance(metric, ScaledMetric) else 0,
    )


async def evaluate_agent(
    rt: Runtime,
    prompts: dict[str, str],
    examples: list[Example],
    judge: JudgeInUse,
    adapter: str | None = None,
) -> Evaluation:
    """Held-out evaluation: true-label accuracy where known, and the judge's pass rate."""
    rollouts = await judged_rollouts(rt, prompts, examples, judge, adapter)
    metric = judge_of(rt, judge)
    true = [rt.agent.reference_score(r.example, r.output) for r in rollouts]
    known = [t for t in true if t is not None]
    return Evaluation(
        n=len(rollouts),
        accuracy=fmean(known) if known else None,
        judge_pass_rate=fmean(metric.passes(r.score) for r in rollouts) if rollouts else 0.0,
    )


async def judged_rollouts(
    rt: Runtime,
    prompts: dict[str, str],
    examples: list[Example],
    judge: JudgeInUse,
    adapter: str | None = None,
    **params: Any,
) -> list[Rollout]:
    """The agent on each example (greedy unless `params` say otherwise), judged."""
    params = {"max_tokens": rt.settings.agent_opt.max_tokens, "temperature": 0.0} | params
    runs = (rt.agent.run(ex, prompts, rt.lm, adapter=adapter, **params) for ex in examples)
    return await judge_rollouts(judge_of(rt, judge), list(await asyncio.gather(*runs)))


async def lora_stage(
    rt: Runtime, examples: list[Example], prompts: dict[str, str], judge: JudgeInUse, run_dir: Path
) -> LoraStage:
    """One slow-loop round: sample, judge, keep the best (rejection sampling), SFT a LoRA
    adapter, and keep it only if the judge prefers it on the Pareto set (never held-out)."""
    cfg = rt.settings.lora
    trainset, valset = split_examples(rt, examples)
    without = fmean(r.score for r in await judged_rollouts(rt, prompts, valset, judge))
    if not cfg.enabled or rt.settings.lm.backend != "local":
        reason = (
            "disabled in settings" if not cfg.enabled else "LoRA training needs the local backend"
        )
        return LoraStage(None, False, 0, None, without, None, note=reason)
    samples = await asyncio.gather(
        *(
            judged_rollouts(
                rt, prompts, trainset, judge, temperature=cfg.sample_temperature, seed=k
            )
            for k in range(cfg.samples_per_example)
        )
    )
    rollouts = [rollout for batch in samples for rollout in batch]
    min_score = judge.threshold if cfg.min_judge_score is None else cfg.min_judge_score
    records = sft_records(rollouts, min_score, cfg.max_train_examples, rt.settings.agent_opt.seed)
    if not records:
        return LoraStage(None, False, 0, None, without, None, note="no rollout passed the judge")
    adapter_dir, train_loss = await _train_once(rt, records, run_dir)
    name = ensure_adapter(rt, run_dir.name, str(adapter_dir))
    with_adapter = fmean(
        r.score for r in await judged_rollouts(rt, prompts, valset, judge, adapter=name)
    )
    keep = with_adapter >= without
    return LoraStage(
        trained_path=str(adapter_dir),
        kept=keep,
        records=len(records),
        train_loss=train_loss,
        val_without=without,
        val_with=with_adapter,
        note="" if keep else "not kept: the judge preferred the base model on the Pareto set",
    )


async def _train_once(rt: Runtime, records: list[dict], run_dir: Path) -> tuple[Path, float]:
    """Train the night's adapter, or reuse it if a crash came after training finished."""
    target, summary = run_dir / "adapter", run_dir / "adapter-training.json"
    if adapter_files_ok(target) and summary.exists():
        return target, json.loads(summary.read_text())["train_loss"]
    base = resolve_model_path(rt.settings.lm.model_path)
    # a thread that ends with training, so its OpenMP pool does not slow the batcher after
    result = await run_in_own_thread(
        train_sft_adapter, records, base, target, rt.settings.lora, seed=rt.settings.agent_opt.seed
    )
    summary.write_text(
        json.dumps(
            {
                "train_loss": result.train_loss,
                "steps": result.steps,
                "examples": result.examples,
                "seconds": result.seconds,
            }
        )
    )
    return result.path, result.train_loss


def ensure_adapter(rt: Runtime, run_id: str, path: str) -> str:
    """Load a night's adapter into the local model once; returns the name to ask for."""
    name = f"adapter-{run_id}"
    if name not in rt.lm.adapters:
        rt.lm.load_adapter(name, path)
    return name
