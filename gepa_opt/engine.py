"""Algorithm 1 of the GEPA paper: the reflective-mutation loop over a Pareto-sampled pool.

This version runs one proposal at a time; everything a proposal touches (budget, cache,
selectors, sampler, state) is already its own object, so the concurrent engine can share
them between workers instead of rewriting the loop's seams.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from typing import Generic

from gepa_opt.budget import Budget
from gepa_opt.cache import EvaluationCache, Split
from gepa_opt.components import make_component_selector
from gepa_opt.config import GEPAConfig
from gepa_opt.evaluator import Evaluator, Example
from gepa_opt.events import (
    BudgetUsed,
    EventBus,
    EventHandler,
    Finished,
    FrontierChanged,
    ProposalAccepted,
    ProposalRejected,
    ProposalStarted,
    RejectReason,
    StopReason,
)
from gepa_opt.pareto import aggregate, best_index, frontier_score, win_counts
from gepa_opt.proposer import propose_texts
from gepa_opt.result import GEPAResult
from gepa_opt.sampling import EpochSampler
from gepa_opt.selection import make_candidate_selector
from gepa_opt.state import GEPAState, ProposalRecord
from gepa_opt.types import (
    Adapter,
    Candidate,
    DataInst,
    EvaluationBatch,
    ExampleId,
    ReflectionLM,
)


async def optimize(
    seed_candidate: Candidate,
    trainset: Sequence[DataInst],
    valset: Sequence[DataInst] | None,
    adapter: Adapter[DataInst],
    reflection_lm: ReflectionLM,
    config: GEPAConfig | None = None,
    *,
    example_id: Callable[[DataInst], ExampleId] | None = None,
    on_event: EventHandler | Iterable[EventHandler] | None = None,
) -> GEPAResult:
    """Evolve `seed_candidate` with reflective mutation until the budget is spent.

    `trainset` feeds reflection minibatches; `valset` (D_pareto; the trainset when None,
    the paper's inference-time search mode) scores every accepted candidate. Example ids
    default to positions in their split; pass `example_id` for stable ids, which the
    evaluation cache and per-instance scores are keyed on.
    """
    engine = GEPAEngine(
        seed_candidate,
        trainset,
        trainset if valset is None else valset,
        adapter,
        reflection_lm,
        config or GEPAConfig(),
        example_id=example_id,
        on_event=on_event,
    )
    return await engine.run()


class GEPAEngine(Generic[DataInst]):
    def __init__(
        self,
        seed_candidate: Candidate,
        trainset: Sequence[DataInst],
        valset: Sequence[DataInst],
        adapter: Adapter[DataInst],
        reflection_lm: ReflectionLM,
        config: GEPAConfig,
        *,
        example_id: Callable[[DataInst], ExampleId] | None = None,
        on_event: EventHandler | Iterable[EventHandler] | None = None,
    ) -> None:
        _check_seed(seed_candidate, config)
        self._seed = dict(seed_candidate)
        self._components = list(seed_candidate)
        self._train = _identify(trainset, example_id, "trainset")
        self._val = _identify(valset, example_id, "valset")
        self._train_by_id = dict(self._train)
        self._adapter = adapter
        self._reflection_lm = reflection_lm
        self._config = config
        self._budget = Budget(config.max_metric_calls)
        self._evaluator = Evaluator(
            adapter, EvaluationCache(), self._budget, config.max_concurrency
        )
        self._candidate_selector = make_candidate_selector(
            config.candidate_selection, config.epsilon
        )
        self._component_selector = make_component_selector(config.module_selection)
        # Separate streams: changing how parents are picked leaves the minibatches alone.
        self._selection_rng = random.Random(f"gepa:{config.seed}:selection")
        self._sampler = EpochSampler(
            [i for i, _ in self._train],
            config.reflection_minibatch_size,
            random.Random(f"gepa:{config.seed}:minibatch"),
        )
        self._events = EventBus(on_event)
        self._frontier: tuple[object, ...] | None = None
        self.state = GEPAState()

    async def run(self) -> GEPAResult:
        await self._add_seed()
        stop: StopReason | None = None
        while stop is None:
            stop = await self._step()
        best = best_index(self.state.val_scores)
        await self._events.emit(
            Finished(
                iteration=self.state.iteration,
                reason=stop,
                best_idx=best,
                best_score=aggregate(self.state.val_scores[best]),
                num_candidates=len(self.state.candidates),
                metric_calls_used=self._budget.metric_calls_used,
                reflection_calls_used=self._budget.reflection_calls,
            )
        )
        return GEPAResult.from_state(self.state, self._budget, stop)

    async def _add_seed(self) -> None:
        """Lines 2-3 of Algorithm 1: without the seed's val scores there is no pool."""
        if not self._budget.fits(len(self._val)):
            raise ValueError(
                f"GEPAConfig.max_metric_calls={self._budget.max_metric_calls} cannot cover "
                f"the seed's valset evaluation ({len(self._val)} examples)"
            )
        val = await self._evaluate(self._seed, Split.VAL, self._val)
        self.state.add(self._seed, (), self._val_scores(val))
        await self._update_frontier()

    async def _step(self) -> StopReason | None:
        """One iteration of the while loop (lines 5-14), or why the loop ends."""
        state, config = self.state, self._config
        parent_idx = self._candidate_selector.select(state.val_scores, self._selection_rng)
        components, cursor = self._component_selector.select(
            self._components, state.component_cursor[parent_idx]
        )
        minibatch = [(i, self._train_by_id[i]) for i in self._sampler.next_batch()]
        parent = state.candidates[parent_idx]
        # Only start what could finish: a proposal whose accepted child could not be
        # evaluated on the whole valset can never add a candidate, so its spend is waste.
        worst_case = (
            self._evaluator.missing(parent, Split.TRAIN, minibatch)
            + len(minibatch)
            + len(self._val)
        )
        if not self._budget.fits(worst_case):
            return StopReason.BUDGET

        state.component_cursor[parent_idx] = cursor
        state.iteration += 1
        await self._events.emit(
            ProposalStarted(
                iteration=state.iteration,
                parent_idx=parent_idx,
                components=tuple(components),
                minibatch_ids=tuple(i for i, _ in minibatch),
            )
        )
        used_before = self._budget.metric_calls_used
        state.history.append(await self._propose(parent_idx, components, minibatch))
        spent = self._budget.metric_calls_used > used_before
        state.idle_iterations = 0 if spent else state.idle_iterations + 1
        if state.idle_iterations >= config.max_idle_iterations:
            return StopReason.STALLED
        return None

    async def _propose(
        self, parent_idx: int, components: list[str], minibatch: list[Example]
    ) -> ProposalRecord:
        config = self._config
        parent = self.state.candidates[parent_idx]
        parent_eval = await self._evaluate(parent, Split.TRAIN, minibatch)
        parent_sum = sum(parent_eval.scores)

        async def reject(
            reason: RejectReason, child_eval: EvaluationBatch | None = None
        ) -> ProposalRecord:
            child_sum = None if child_eval is None else sum(child_eval.scores)
            await self._events.emit(
                ProposalRejected(
                    iteration=self.state.iteration,
                    parent_idx=parent_idx,
                    reason=reason,
                    parent_minibatch_score=parent_sum,
                    child_minibatch_score=child_sum,
                )
            )
            return self._record(parent_idx, components, minibatch, parent_eval, child_eval, reason)

        if config.skip_perfect_score and all(s >= config.perfect_score for s in parent_eval.scores):
            return await reject(RejectReason.PERFECT_PARENT)

        texts = await propose_texts(
            self._adapter,
            self._reflection_lm,
            parent,
            parent_eval,
            components,
            config.template_for,
        )
        self._budget.record_reflections(len(components))
        await self._emit_budget(metric_calls=0, reflection_calls=len(components))
        changed = {c: text for c, text in texts.items() if text}
        if not changed:
            return await reject(RejectReason.EMPTY_PROPOSAL)
        child = {**parent, **changed}
        if self.state.contains(child):
            return await reject(RejectReason.DUPLICATE)

        child_eval = await self._evaluate(child, Split.TRAIN, minibatch)
        child_sum = sum(child_eval.scores)
        if child_sum <= parent_sum:
            return await reject(RejectReason.NOT_IMPROVED, child_eval)

        val = await self._evaluate(child, Split.VAL, self._val)
        child_idx = self.state.add(child, (parent_idx,), self._val_scores(val))
        await self._events.emit(
            ProposalAccepted(
                iteration=self.state.iteration,
                parent_idx=parent_idx,
                candidate_idx=child_idx,
                components=tuple(changed),
                parent_minibatch_score=parent_sum,
                child_minibatch_score=child_sum,
                val_score=aggregate(self.state.val_scores[child_idx]),
            )
        )
        await self._update_frontier()
        return self._record(parent_idx, components, minibatch, parent_eval, child_eval, None)

    def _record(
        self,
        parent_idx: int,
        components: list[str],
        minibatch: list[Example],
        parent_eval: EvaluationBatch,
        child_eval: EvaluationBatch | None,
        reason: RejectReason | None,
    ) -> ProposalRecord:
        return ProposalRecord(
            iteration=self.state.iteration,
            parent_idx=parent_idx,
            components=tuple(components),
            minibatch_ids=tuple(i for i, _ in minibatch),
            parent_scores=tuple(parent_eval.scores),
            child_scores=None if child_eval is None else tuple(child_eval.scores),
            reject_reason=reason,
            candidate_idx=len(self.state.candidates) - 1 if reason is None else None,
        )

    async def _evaluate(
        self, candidate: Candidate, split: Split, examples: Sequence[Example]
    ) -> EvaluationBatch:
        batch, charged = await self._evaluator.evaluate(candidate, split, examples)
        if charged:
            await self._emit_budget(metric_calls=charged, reflection_calls=0)
        return batch

    async def _emit_budget(self, metric_calls: int, reflection_calls: int) -> None:
        await self._events.emit(
            BudgetUsed(
                iteration=self.state.iteration,
                metric_calls=metric_calls,
                reflection_calls=reflection_calls,
                metric_calls_used=self._budget.metric_calls_used,
                max_metric_calls=self._budget.max_metric_calls,
                reflection_calls_used=self._budget.reflection_calls,
            )
        )

    async def _update_frontier(self) -> None:
        """Announce only real changes, so a caller can log one point per improvement."""
        scores = self.state.val_scores
        best = best_index(scores)
        event = FrontierChanged(
            iteration=self.state.iteration,
            best_idx=best,
            best_score=aggregate(scores[best]),
            frontier_score=frontier_score(scores),
            pareto_candidates=tuple(win_counts(scores)),
            num_candidates=len(scores),
        )
        key = (event.best_idx, event.frontier_score, event.pareto_candidates)
        if key != self._frontier:
            self._frontier = key
            await self._events.emit(event)

    def _val_scores(self, batch: EvaluationBatch) -> dict[ExampleId, float]:
        return {i: score for (i, _), score in zip(self._val, batch.scores, strict=True)}


def _identify(
    data: Sequence[DataInst], example_id: Callable[[DataInst], ExampleId] | None, name: str
) -> list[Example]:
    """Pair each example with its id; ids must be unique, or cache hits would cross examples."""
    if len(data) == 0:
        raise ValueError(f"{name} is empty")
    ids = [example_id(x) for x in data] if example_id else list(range(len(data)))
    seen: set[ExampleId] = set()
    for position, i in enumerate(ids):
        if i in seen:
            raise ValueError(f"{name}[{position}]: example id {i!r} is not unique in {name}")
        seen.add(i)
    return list(zip(ids, data, strict=True))


def _check_seed(seed: Candidate, config: GEPAConfig) -> None:
    if not seed:
        raise ValueError("seed_candidate has no components")
    for name, text in seed.items():
        if not isinstance(name, str) or not isinstance(text, str):
            raise ValueError(f"seed_candidate[{name!r}] must map a str name to a str text")
    unknown = sorted(set(config.component_prompt_templates) - set(seed))
    if unknown:
        raise ValueError(
            f"GEPAConfig.component_prompt_templates names unknown components {unknown}; "
            f"the seed has {list(seed)}"
        )
