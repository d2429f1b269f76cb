"""The nightly stages as plain async functions: importable and testable without Prefect.

Each takes the runtime and plain data, composes what `judges/`, `gepa_opt/` and
`weights/` decide, and returns a small, picklable result, so that Prefect can persist it
and a failed night resumes without redoing finished stages.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import fmean
from typing import Any

from flows.night.runtime import Runtime
from flows.report.progress import StageProgress
from gepa_opt import Demo, Demonstrations, GEPAConfig, PoolEntry, RejectReason, optimize
from infra.agents.contract import demonstrations_component, judge_rubric
from infra.lm.heap import release_free_heap
from infra.lm.reflection import reflection_lm
from infra.scales import ScoreScale
from infra.settings import AgentOptSettings, GEPASettings, LoraSettings, NetworkSettings
from infra.types import Example, Rollout
from judges.addressing import addresses_judge
from judges.agent_metric import AgentJudgeAdapter, RolloutJudge, judge_rollouts, judged_item
from judges.align import Alignment, align
from judges.calls import Done, answered, each, gepa_reflection
from judges.judge import Judge
from judges.judge_head import JudgeHead, judge_head_step
from judges.judge_lora import JudgeLora, judge_lora_step
from judges.labelled_metric import labelled_metric
from judges.pointwise import seed_judge_prompts
from judges.reward_head import HeadFit
from judges.splits import judge_splits
from judges.types import JudgedItem, render_inputs
from judges.weighted_metric import WeightedMetric
from weights.lora import saved_adapters
from weights.round import LoraRound, ServedAdapter, lora_round, train_once

OnEvent = Callable[[Any], None] | None


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
    # proposals refused unevaluated: a restated meta-prompt, a prompt addressing the judge
    refused: int = 0
    # the Pareto front: each candidate with the number of val examples it is best on
    front: list[tuple[dict[str, str], int]] = field(default_factory=list)
    proposals: int = 0  # texts proposed (by reflection or from the demonstrations' pool)
    differed: int = 0  # of them, those not equal to their parent (and not empty)
    # GEPA's pool: each candidate's parents, validation score and when it was found (a
    # tuple: its class default is what a result pickled before this field reads)
    pool: tuple[PoolEntry, ...] = ()

    @property
    def accepted(self) -> int:
        """Proposals that joined the pool (the seed is not one)."""
        return max(self.candidates - 1, 0)


# What a proposal can end as once it was made; the other reasons end a trial before one.
PROPOSED = (
    RejectReason.EMPTY_PROPOSAL,
    RejectReason.REFUSED,
    RejectReason.UNCHANGED,
    RejectReason.DUPLICATE,
    RejectReason.NOT_IMPROVED,
    RejectReason.NO_BUDGET,
    RejectReason.SIBLING_BETTER,
)


def proposal_counts(rejections: Mapping[RejectReason, int], candidates: int) -> tuple[int, int]:
    """(proposals made, those that differed from their parent) of a GEPA run."""
    made = max(candidates - 1, 0) + sum(rejections.get(r, 0) for r in PROPOSED)
    same = sum(rejections.get(r, 0) for r in (RejectReason.UNCHANGED, RejectReason.EMPTY_PROPOSAL))
    return made, made - same


@dataclass
class Evaluation:
    n: int  # examples scored (the agent's and the judge's calls succeeded)
    accuracy: float | None  # against true labels, when the examples have them
    judge_pass_rate: float | None  # on the examples with no true label; None: none
    # Per example, for the promotion gate's paired comparison: the true-label score where
    # known, else the judge's; and the slice each example belongs to.
    scores: dict[str, float] = field(default_factory=dict)
    slices: dict[str, str] = field(default_factory=dict)
    by_labels: bool = False  # every score is against a true label
    failed: int = 0  # examples left out: a model call failed for good
    # a replayed tool-calling agent: its tool calls by how they were answered
    tool_steps: dict[str, int] = field(default_factory=dict)
    # per example, its reply and its request as a judge reads it: what a pairwise judge
    # compares with another version's reply (`judges.pairwise_gate`)
    outputs: dict[str, str] = field(default_factory=dict)
    requests: dict[str, str] = field(default_factory=dict)

    def __setstate__(self, state: dict[str, Any]) -> None:
        """An evaluation pickled before a field was kept (a night resumed across the
        change) reads as having none of it."""
        self.__dict__.update({"tool_steps": {}, "outputs": {}, "requests": {}} | state)


def gepa_config(
    cfg: GEPASettings, seed: int, network: NetworkSettings | None = None, **overrides: Any
) -> GEPAConfig:
    """The one place settings become a `GEPAConfig`: the stage's knobs, and how its
    failed model calls are tried again and when too many end it (`network`)."""
    network = network or NetworkSettings()
    failed = max(1, math.ceil(network.max_failed_share * cfg.max_metric_calls))
    return GEPAConfig(
        **cfg.gepa_fields(),
        seed=seed,
        call_attempts=network.call_attempts,
        max_failed_calls=failed,
        **overrides,
    )


def _folder(path: Path | None) -> str | None:
    return None if path is None else str(path)


def judge_items_split(
    rt: Runtime, items: list[JudgedItem]
) -> tuple[list[JudgedItem], list[JudgedItem], list[JudgedItem]]:
    return judge_splits(items, rt.settings.judge.heldout_fraction, rt.settings.seed)


def judge_seed(rt: Runtime) -> dict[str, str]:
    """The rubric alignment starts from: the settings', else the agent's, else generic."""
    return seed_judge_prompts(rt.settings.judge.rubric or judge_rubric(rt.agent))


async def align_judge_stage(
    rt: Runtime,
    items: list[JudgedItem],
    scale: ScoreScale,
    on_event: OnEvent = None,
    run_dir: Path | None = None,
) -> Alignment:
    """Align the judge; with `run_dir`, its GEPA run resumes from there after a kill,
    paying for nothing it saved."""
    cfg, seed = rt.settings.judge, rt.settings.seed
    train, val, heldout = judge_items_split(rt, items)
    return await align(
        rt.judge_lm,
        judge_seed(rt),
        scale,
        train,
        val,
        heldout,
        gepa_config(
            cfg, seed, rt.settings.network, skip_perfect_score=False, run_dir=_folder(run_dir)
        )
        if cfg.max_metric_calls > 0
        else None,  # the seed rubric, measured
        gepa_reflection(reflection_lm(rt.reflection_lm, cfg.reflection_max_tokens, seed)),
        on_event,
        floor=cfg.min_agreement,
        seed=seed,
    )


async def judge_lora_stage(
    rt: Runtime,
    alignment: Alignment,
    items: list[JudgedItem],
    run_dir: Path,
    progress: StageProgress | None = None,
) -> tuple[Alignment, JudgeLora]:
    """The judge's LoRA step on the training labels (`judges.judge_lora`), trained into
    `run_dir` (a resumed night reuses an adapter that finished training there). The
    result holds how training went (`JudgeLora.history`), for its run in MLflow.
    `progress` counts the optimizer steps, then the saved adapters read on validation."""
    cfg, seed = rt.settings.judge.lora, rt.settings.seed
    if not cfg.enabled:
        return alignment, JudgeLora(0, alignment.judge_val_score, note="judge.lora.enabled is off")
    lm = rt.judge_lm
    if not hasattr(lm, "load_adapter"):  # not isinstance: that would resolve the model
        note = f"{type(lm).__name__} does not serve LoRA adapters"
        return alignment, JudgeLora(0, alignment.judge_val_score, note=note)
    train, val, heldout = judge_items_split(rt, items)
    trained: dict[str, Any] = {}  # the training summary (`weights.lora.TRAINING_SUMMARY`)

    async def train_adapter(records: list) -> list[Path]:
        await release_free_heap()  # what alignment freed, before training stacks on it
        steps = progress.on_train_step if progress else None
        folder, summary = await train_once(
            "sft", lm.base_model_path, None, records, run_dir / "adapter", cfg.training(), seed,
            progress=steps,
        )  # fmt: skip
        trained.update(summary)
        await release_free_heap()
        folders = saved_adapters(folder)
        if progress is not None:
            progress.phase("adapters read on validation labels", len(folders))
        return folders

    alignment, step = await judge_lora_step(
        lm,
        alignment,
        train,
        val,
        heldout,
        train_adapter,
        seed,
        cfg.injections,
        cfg.comments,
        cfg.memory,
        cfg.mismatched,
        progress.advance if progress else None,
    )
    if trained:
        step.history = tuple(trained.get("history", ()))
        step.train_steps = int(trained["steps"])
        step.device = str(trained.get("device", ""))
    return alignment, step


async def judge_head_stage(
    rt: Runtime,
    alignment: Alignment,
    lora: JudgeLora,
    items: list[JudgedItem],
    folder: Path,
    progress: StageProgress | None = None,
) -> tuple[Alignment, JudgeHead]:
    """The judge's reward-head step (`judges.judge_head`) after its LoRA step, against
    the judge so far on the validation labels; a kept head is saved in `folder`."""
    cfg, seed = rt.settings.judge.head, rt.settings.seed
    so_far = "rubric plus LoRA adapter" if lora.kept else "the rubric"
    so_far_val = lora.kept_val if lora.kept_val is not None else alignment.judge_val_score
    if not cfg.enabled:
        return alignment, JudgeHead(so_far, so_far_val, note="judge.head.enabled is off")
    train, val, heldout = judge_items_split(rt, items)
    return await judge_head_step(
        rt.judge_lm,
        alignment,
        train,
        val,
        heldout,
        folder,
        so_far,
        so_far_val,
        seed,
        HeadFit(strengths=tuple(cfg.strengths), folds=cfg.folds),
        cfg.memory,
        progress,
        cfg.injections,
    )


def judge_metric(rt: Runtime, judge: Judge) -> RolloutJudge:
    """The night's judge as the agent's metric, built once per stage."""
    return judge.metric(rt.judge_lm, rt.settings.judge.rationale_max_tokens)


def objective_metric(
    rt: Runtime, judge: Judge, weighted: Sequence[tuple[Judge, float]] = ()
) -> RolloutJudge:
    """The agent's GEPA objective: the night's judge, or with weighted secondary criteria
    (`flows.night.criteria.weighted`), its score averaged with theirs by weight."""
    primary = judge_metric(rt, judge)
    if not weighted:
        return primary
    return WeightedMetric(primary, [(judge_metric(rt, j), weight) for j, weight in weighted])


def split_examples(rt: Runtime, examples: list[Example]) -> tuple[list[Example], list[Example]]:
    """(trainset, valset): the Pareto set is a fixed, seeded sample of the traffic."""
    shuffled = sorted(examples, key=lambda e: e.id)
    random.Random(rt.settings.seed).shuffle(shuffled)
    size = min(rt.settings.agent_opt.pareto_size, len(shuffled) // 2)
    return shuffled[size:], shuffled[:size]


async def optimize_prompts_stage(
    rt: Runtime,
    examples: list[Example],
    seed_prompts: dict[str, str],
    judge: Judge,
    on_event: OnEvent = None,
    adapter: str | None = None,
    run_dir: Path | None = None,
    cfg: AgentOptSettings | None = None,
    targets: Mapping[str, str] | None = None,
    weighted: Sequence[tuple[Judge, float]] = (),
) -> PromptStage:
    """GEPA on the agent's prompts, run on the model with `adapter` (the night's current
    one), on `cfg` (a prompt step's share of `agent_opt`); with `run_dir`, a killed run
    resumes from there, paying for nothing it saved. `targets`: per labelled trace, the
    reply it should have given (`Collected.reply_targets`), the pool of the agent's
    demonstrations component where it has one. `weighted`: the secondary criteria's judges
    in the objective, with their weights (`objective_metric`)."""
    cfg, seed = cfg or rt.settings.agent_opt, rt.settings.seed
    trainset, valset = split_examples(rt, examples)
    # scored against people's right replies where they gave one, by the judge elsewhere
    judged = objective_metric(rt, judge, weighted)
    metric = labelled_metric(rt.agent, judged, targets or {})
    shown = demonstrations(rt, trainset, seed_prompts, targets or {}, metric, cfg)
    gepa_adapter = AgentJudgeAdapter(
        rt.agent, rt.lm, metric, max_tokens=cfg.max_tokens, temperature=0.0, adapter=adapter
    )
    result = await optimize(
        seed_prompts,
        trainset,
        valset,
        gepa_adapter,
        gepa_reflection(reflection_lm(rt.reflection_lm, cfg.reflection_max_tokens, seed)),
        gepa_config(
            cfg,
            seed,
            rt.settings.network,
            run_dir=_folder(run_dir),
            module_selection=cfg.module_selection,
        ),
        example_id=lambda ex: ex.id,
        on_event=on_event,
        demonstrations=shown,
    )
    proposals, differed = proposal_counts(result.rejections, len(result.candidates))
    return PromptStage(
        prompts=dict(result.best_candidate),
        seed_val=result.val_aggregate_scores[0],
        best_val=result.val_aggregate_scores[result.best_idx],
        metric_calls=result.metric_calls_used,
        reflection_calls=result.reflection_calls,
        candidates=len(result.candidates),
        judge_unparseable=judged.unparseable,
        refused=result.rejections.get(RejectReason.REFUSED, 0),
        front=[(dict(result.candidates[k]), wins) for k, wins in result.front().items()],
        proposals=proposals,
        differed=differed,
        pool=result.pool(),
    )


def demonstrations(
    rt: Runtime,
    trainset: list[Example],
    prompts: dict[str, str],
    targets: Mapping[str, str],
    metric: RolloutJudge,
    cfg: AgentOptSettings,
) -> Demonstrations | None:
    """The agent's demonstrations component with its pool: each training trace's right
    reply as the agent writes a demonstration (never a Pareto-set trace's: the valset
    pass would measure recall); None where the agent declares none or nothing is labelled."""
    component = demonstrations_component(rt.agent)
    if not cfg.demonstrations or component is None or component not in prompts:
        return None
    pool = tuple(
        Demo(render_inputs(ex.inputs), line)
        for ex in trainset
        if ex.id in targets
        and (line := rt.agent.demonstration(ex, targets[ex.id]))
        and addresses_judge(line) is None  # the adapter refuses a text that holds one
    )
    if not pool:
        return None
    return Demonstrations(
        component,
        pool,
        max_tokens=cfg.demonstration_tokens,
        request_of=lambda ex: render_inputs(ex.inputs),
        passes=metric.passes,
    )


async def evaluate_agent(
    rt: Runtime,
    prompts: dict[str, str],
    examples: list[Example],
    judge: Judge,
    adapter: str | None = None,
    progress: StageProgress | None = None,
) -> Evaluation:
    """Held-out evaluation: true-label accuracy where known, and the judge's score where
    not (`scored_rollouts`, which counts on `progress`)."""
    metric = judge_metric(rt, judge)
    rollouts = await scored_rollouts(rt, prompts, examples, metric, adapter, progress)
    true = {r.example.id: rt.agent.reference_score(r.example, r.output) for r in rollouts}
    judged = [r for r in rollouts if true[r.example.id] is None]
    known = [t for t in true.values() if t is not None]
    return Evaluation(
        n=len(rollouts),
        accuracy=fmean(known) if known else None,
        judge_pass_rate=fmean(metric.passes(r.score) for r in judged) if judged else None,
        scores={r.example.id: r.score for r in rollouts},
        slices={ex.id: s for ex in examples if (s := slice_of(ex)) is not None},
        by_labels=bool(rollouts) and not judged,
        failed=len(examples) - len(rollouts),
        tool_steps=dict(sum((Counter(r.tool_steps) for r in rollouts), Counter())),
        outputs={r.example.id: r.output for r in rollouts},
        requests={r.example.id: judged_item(r).input_text for r in rollouts},
    )


async def scored_rollouts(
    rt: Runtime,
    prompts: dict[str, str],
    examples: list[Example],
    metric: RolloutJudge,
    adapter: str | None = None,
    progress: StageProgress | None = None,
) -> list[Rollout]:
    """The agent's greedy rollouts, each scored against its true label where the example
    has one, else by the judge; those whose calls failed for good are left out. An example
    with a true label is not judged: the verdict would decide nothing there, and on a CPU
    the teacher's reading is most of an evaluation's time. `progress` counts the
    rollouts as they end, then (a phase of its own) the replies judged."""
    ran = await agent_rollouts(rt, prompts, examples, adapter, done=_advance(progress))
    unlabelled = []
    for rollout in ran:
        rollout.score = rt.agent.reference_score(rollout.example, rollout.output)
        if rollout.score is None:
            unlabelled.append(rollout)
    if unlabelled:
        if progress is not None:
            progress.phase("replies judged", len(unlabelled))
        # scores those it could judge, in place
        await judge_rollouts(metric, unlabelled, done=_advance(progress))
    return [r for r in ran if r.score is not None]


def _advance(progress: StageProgress | None) -> Done | None:
    return None if progress is None else progress.advance


def slice_of(example: Example) -> str | None:
    """The slice the promotion gate checks an example in: what the agent says
    (`metadata["slice"]`: an intent, a tag, a prompt), else its reference answer."""
    return example.metadata.get("slice") or example.reference


async def agent_rollouts(
    rt: Runtime,
    prompts: dict[str, str] | Callable[[Example], dict[str, str]],
    examples: list[Example],
    adapter: str | None = None,
    done: Done | None = None,
    **params: Any,
) -> list[Rollout]:
    """The agent on each example (greedy unless `params` say otherwise) with `prompts`
    (or the prompts a function picks per example), unscored; the examples where a model
    call failed for good are left out. `done(1)` as each run ends."""
    params = {"max_tokens": rt.settings.agent_opt.max_tokens, "temperature": 0.0} | params
    pick = prompts if callable(prompts) else lambda _: prompts

    async def run(example: Example) -> Rollout:
        return await rt.agent.run(example, pick(example), rt.lm, adapter=adapter, **params)

    _, rollouts = answered(examples, await each(examples, run, done))
    return rollouts


async def judged_rollouts(
    rt: Runtime,
    prompts: dict[str, str] | Callable[[Example], dict[str, str]],
    examples: list[Example],
    metric: RolloutJudge,
    adapter: str | None = None,
    done: Done | None = None,
    **params: Any,
) -> list[Rollout]:
    """`agent_rollouts`, judged (those whose judging call failed for good left out);
    `done(1)` as each run ends."""
    return await judge_rollouts(
        metric, await agent_rollouts(rt, prompts, examples, adapter, done, **params)
    )


async def lora_stage(
    rt: Runtime,
    examples: list[Example],
    prompts: dict[str, str],
    judge: Judge,
    run_dir: Path,
    base: ServedAdapter | None = None,
    cfg: LoraSettings | None = None,
    front: list[tuple[dict[str, str], int]] | None = None,
    adapter_name: str | None = None,
    human: Mapping[str, Sequence[tuple[str, float]]] | None = None,
    compare_on: list[Example] | None = None,
    progress: StageProgress | None = None,
) -> LoraRound:
    """The weight round on the agent's traffic, its rollouts judged by the night's judge,
    from the night's current adapter (`base`) when there is one, on `cfg` (a weight
    step's share of `lora`). With a Pareto `front` (FST), each sampled rollout runs the
    prompts of a front candidate drawn as GEPA draws parents; the comparisons run `prompts`.
    `human`: per trace, replies people judged (`Collected.human_replies`), which train
    first when `lora.human_labels` is on. `compare_on`: the examples the adapter and its
    checkpoints are compared on (the held-out selection slice, scored against true labels
    where known: `scored_rollouts`); None: the Pareto set. `progress` counts rollouts
    while the round samples and compares, optimizer steps while it trains."""
    trainset, valset = split_examples(rt, examples)
    valset = compare_on or valset
    metric = judge_metric(rt, judge)
    cfg, seed = cfg or rt.settings.lora, rt.settings.seed

    async def rollouts(
        examples: list[Example], adapter: str | None, judged: bool = True, **params: Any
    ) -> list[Rollout]:
        if progress is not None:  # the draws run at once: each adds its share
            if progress.unit != "rollouts":
                progress.phase("rollouts")
            progress.expect(len(examples))
        sampled = params.get("temperature", 0.0) > 0  # training samples, not a comparison
        if not sampled:
            return await scored_rollouts(rt, prompts, examples, metric, adapter, progress)
        chosen = _front_draw(front, seed, params.get("seed", 0)) if front else prompts
        done = _advance(progress)
        if not judged:
            return await agent_rollouts(rt, chosen, examples, adapter, done, **params)
        return await judged_rollouts(rt, chosen, examples, metric, adapter, done, **params)

    async def judge_replies(replies: list[Rollout]) -> list[float | None]:
        await judge_rollouts(metric, replies)  # scores the ones it could judge
        return [reply.score for reply in replies]

    return await lora_round(
        rt.lm,
        rollouts,
        trainset,
        valset,
        cfg,
        run_dir,
        min_score=judge.threshold,
        seed=seed,
        base=base,
        adapter_name=adapter_name,
        human=human if cfg.human_labels else None,
        judge_replies=judge_replies,
        progress=progress.on_train_step if progress else None,
        # GRPO judges while it trains; SFT and DPO leave the judge (a teacher: 4 GiB) idle
        before_training=None if "grpo" in cfg.method else rt.rest_models_but_agent,
    )


def _front_draw(
    front: list[tuple[dict[str, str], int]], seed: int, sample: int
) -> Callable[[Example], dict[str, str]]:
    """Per example, a front candidate drawn in proportion to the val examples it leads
    on; seeded by the example and the sample, so a resumed night draws the same."""
    candidates, weights = zip(*front, strict=True)

    def pick(example: Example) -> dict[str, str]:
        rng = random.Random(f"fst:{seed}:{sample}:{example.id}")
        return rng.choices(candidates, weights=weights)[0]

    return pick
