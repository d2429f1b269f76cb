"""Reflective mutation (§3.2): the LM reads traces and feedback, and rewrites a component."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from gepa_opt.extraction import extract_proposal
from gepa_opt.meta_prompt import build_reflection_prompt
from gepa_opt.types import Adapter, Candidate, DataInst, EvaluationBatch, ReflectionLM
from gepa_opt.workers import Priority, WorkerPool


async def propose_texts(
    adapter: Adapter[DataInst],
    reflection_lm: ReflectionLM,
    parent: Candidate,
    parent_eval: EvaluationBatch,
    components: list[str],
    template_for: Callable[[str], str],
    workers: WorkerPool,
    priority: Priority = 0,
) -> dict[str, str]:
    """New text per component ("" where the LM proposed nothing), one LM call each.

    The reflective dataset is built once for all components, since the adapter does the
    credit assignment of a whole trace to its modules.
    """
    dataset = await adapter.make_reflective_dataset(parent, parent_eval, components)
    missing = [c for c in components if c not in dataset]
    if missing:
        raise ValueError(f"adapter.make_reflective_dataset returned no records for {missing}")
    replies = await asyncio.gather(
        *(
            workers.run(
                reflection_lm(build_reflection_prompt(template_for(c), parent[c], dataset[c])),
                priority,
                kind="reflection",
            )
            for c in components
        )
    )
    return {c: extract_proposal(reply) for c, reply in zip(components, replies, strict=True)}
