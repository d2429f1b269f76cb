"""How a night's stage becomes a Prefect task: its result persisted under the run id (and
the step of the schedule), so that `flywheel run --resume` redoes only what did not finish."""

from __future__ import annotations

from prefect import task

from flows.night.runtime import Runtime
from flows.report.progress import StageProgress
from weights.round import ServedAdapter, ensure_adapter


def _stage_key(context, parameters) -> str:
    """One result per night and stage (and per step of the schedule)."""
    step = parameters.get("step")
    return f"{parameters['run_id']}:{context.task.name}" + ("" if step is None else f":{step}")


def stage(name: str):
    return task(name=name, cache_key_fn=_stage_key, persist_result=True, retries=0)


async def optimizing(label: str, budget: int, run):
    """Run a GEPA stage under a progress bar, and keep its optimization curve and when
    each candidate of its pool was found."""
    with StageProgress(label, budget, "metric calls") as progress:
        result = await run(progress.on_event)
    result.curve = progress.curve
    result.pool = progress.dated(result.pool)
    return result


async def served(rt: Runtime, adapter: ServedAdapter | None) -> str | None:
    """The name `adapter` is served under, loading it first if need be (None: base model)."""
    return await ensure_adapter(rt.lm, adapter) if adapter else None
