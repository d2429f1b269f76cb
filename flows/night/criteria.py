"""The secondary criteria (`traces.criteria`) as a night runs them: each annotation name's
labels, its own judge aligned and gated on them, and that judge's scores of the held-out
replies the promotion gate compares.

A criterion's judge goes through the primary's alignment and gate code on its own scale,
but without a GEPA search of its rubric: its cut is fitted on its training labels
(`align` with no config), its agreement measured on its held-out labels, and it is
registered under names of its own (`judges.versions`), and its judge in use is watched on
its new labels as the primary's is. The primary's other extra steps (its LoRA step,
reward head and injection check) are the primary's alone: a night pays for them once.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from flows.night.collect import CriterionLabels, collect, in_heldout_slice
from flows.night.label_read import read_labels
from flows.night.runtime import Runtime
from flows.night.stages import Evaluation, judge_items_split
from flows.production.criteria_gate import CriterionEvidence
from flows.report.progress import StageProgress
from infra.traces import TraceBatch
from judges.align import Alignment, align
from judges.choose import JudgeGate, choose_judge, not_comparable
from judges.judge import Judge
from judges.pointwise import seed_judge_prompts
from judges.scaled_metric import check_ranked
from judges.types import JudgedItem
from judges.versions import production_judge
from judges.watch import Watch, watch_judge


@dataclass(frozen=True)
class CriterionJudge:
    """A secondary criterion's judge as tonight's gate left it."""

    name: str  # its annotation name
    weight: float  # its share of the agent's objective (`traces.criteria.<name>.weight`)
    max_drop: float
    alignment: Alignment
    gate: JudgeGate

    @property
    def judge(self) -> Judge:
        return self.gate.judge

    @property
    def trusted(self) -> bool:
        return self.gate.trusted


def criterion_labels(
    rt: Runtime,
    name: str,
    batch: TraceBatch,
    have: set[str],
    since: datetime | None,
    fetched_at: datetime,
) -> CriterionLabels:
    """The criterion's labels to date on its own scale, read into the store as the
    primary's are; those on the held-out slice's traces left out, as the primary's."""
    read = read_labels(rt, name, batch, have, fetched_at)
    scale = rt.traces.score_scale(name, ordinal=rt.settings.judge.ordinal_categories)
    cfg = rt.settings.traces
    found = collect(
        batch, rt.agent, name, since, fetched_at, scale, read.labels, cfg.max_text_chars
    )
    check_ranked(found.scale)  # before any budget: a scale with no order scores nothing
    share = rt.settings.eval.heldout_trace_share
    items = [i for i in found.items if share <= 0 or not in_heldout_slice(i.id, share)]
    return CriterionLabels(
        name, items, found.scale, found.window, read.read_to, read.read_all, found.labelled_at
    )


def criterion_seed(name: str, rubric: str) -> dict[str, str]:
    """The rubric its judge starts from: the settings', else one naming the criterion."""
    generic = (
        f"You judge one quality of an assistant's reply, named {name!r} by the people who "
        "label them: whether the reply has it."
    )
    return seed_judge_prompts(rubric or generic)


async def align_criterion(
    rt: Runtime, run_id: str, labels: CriterionLabels, progress: StageProgress | None = None
) -> CriterionJudge:
    """Its judge in use watched on the labels new to it, its seed rubric fitted and
    measured on its labels, gated against that judge, and registered (`judges.choose`,
    under the criterion's names): a drifted judge in use, kept, is not trusted, and a
    criterion whose judge is not trusted neither steers the agent nor blocks the gate."""
    cfg, seed = rt.settings.judge, rt.settings.seed
    settings = rt.settings.traces.criteria[labels.name]
    train, val, heldout = judge_items_split(rt, labels.items)
    rubric = criterion_seed(labels.name, settings.rubric)
    folder = rt.run_dir(run_id) / f"judge-production-{labels.name}"
    watch = await watch_criterion(rt, labels, list(rubric), folder)
    alignment = await align(
        rt.judge_lm, rubric, labels.scale, train, val, heldout, None, None, seed=seed
    )
    gate = await choose_judge(
        rt.judge_lm,
        rt.registry,
        run_id,
        alignment,
        heldout,
        labels.window,
        cfg.min_agreement,
        seed,
        cfg.min_heldout_labels,
        folder,
        progress,
        criterion=labels.name,
    )
    gate = replace(gate, watch=watch)
    return CriterionJudge(labels.name, settings.weight, settings.max_drop, alignment, gate)


async def watch_criterion(
    rt: Runtime, labels: CriterionLabels, components: list[str], folder: Path
) -> Watch | None:
    """The criterion's judge in use on its labels made after the newest it learned from
    (`judges.watch`, as the primary's); None: it has none in use on this scale."""
    cfg = rt.settings.judge
    in_use = production_judge(rt.registry, components, folder, labels.name)
    if in_use is None or not_comparable(rt.judge_lm, in_use, labels.scale):
        return None
    return await watch_judge(
        rt.judge_lm,
        in_use,
        labels.items,
        labels.labelled_at,
        rt.settings.seed,
        cfg.max_agreement_drop,
        cfg.min_watch_labels,
    )


def weighted(criteria: tuple[CriterionJudge, ...]) -> tuple[tuple[Judge, float], ...]:
    """The criteria in the agent's objective: a weight above 0, and a judge that passed
    its gate (an untrusted one would steer the agent by noise)."""
    return tuple((c.judge, c.weight) for c in criteria if c.weight > 0 and c.trusted)


async def criterion_evidence(
    rt: Runtime, criterion: CriterionJudge, candidate: Evaluation, production: Evaluation
) -> CriterionEvidence:
    """The criterion's judge on both versions' held-out replies, as each evaluation kept
    them: no agent runs again. The primary's true labels (a reference answer) say
    nothing of another criterion, so every reply is judged."""
    metric = criterion.judge.metric(rt.judge_lm, rt.settings.judge.rationale_max_tokens)

    async def scores(evaluation: Evaluation) -> dict[str, float]:
        ids = sorted(evaluation.outputs)
        items = [JudgedItem(i, evaluation.requests[i], evaluation.outputs[i]) for i in ids]
        found = await metric.p_pass_many(items)
        return {i: s for i, s in zip(ids, found, strict=True) if s is not None}

    new = await scores(candidate)
    old = new if production is candidate else await scores(production)
    return CriterionEvidence(criterion.name, new, old, criterion.trusted, criterion.max_drop)
