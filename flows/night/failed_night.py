"""A night that fails still leaves its MLflow run: FAILED, with its settings, what its
finished stages measured, its model calls and faults per stage, and the one sentence
of why. A resumed night that then succeeds finishes the same run."""

from __future__ import annotations

import logging

from flows.night.calls import call_metrics
from flows.night.clock import StageClock
from flows.night.collect import Collected, summarize
from flows.night.night_settings import night_settings
from flows.night.runtime import Runtime
from flows.night.stages import Evaluation, PromptStage
from flows.report.history import NIGHT_PREFIX
from flows.report.night_report import (
    alignment_metrics,
    heldout_metrics,
    lora_metrics,
    prompt_metrics,
    seconds_metrics,
    trace_metrics,
)
from infra.lm import StageCalls
from infra.redaction import mask
from judges.align import Alignment
from weights.round import LoraRound

log = logging.getLogger(__name__)


class _EndFailed(Exception):
    """Raised inside the run's block so that it ends FAILED."""


def measured(clock: StageClock, calls: dict[str, StageCalls]) -> dict[str, float]:
    """Flat numbers of the stages that finished, named as a whole night's report names
    them (`night_report`'s metric helpers)."""
    out = call_metrics(calls) | seconds_metrics(clock.intervals)
    for name, result in clock.results.items():
        if isinstance(result, Collected):
            out |= trace_metrics(summarize(result))
        elif isinstance(result, Alignment):
            out |= alignment_metrics(result)
        elif isinstance(result, PromptStage):  # clocked as "step<k>_prompts"
            out |= prompt_metrics(result, f"{name.removesuffix('_prompts')}_agent")
        elif isinstance(result, LoraRound):  # clocked as "step<k>_lora"
            out |= lora_metrics(result, name)
        elif isinstance(result, Evaluation):
            out |= heldout_metrics(name.removeprefix("eval_"), result)
    return out


def record_failed_night(
    rt: Runtime,
    run_id: str,
    clock: StageClock,
    calls: dict[str, StageCalls],
    error: BaseException,
) -> None:
    """Leave the night's MLflow run FAILED with what it had; never raises (the night's
    own error is what the user must see)."""
    tags = {"flywheel.run_id": run_id}
    try:
        registry = rt.registry
        with registry.start_or_resume_run(NIGHT_PREFIX + run_id, tags):
            logged = night_settings(rt.run_dir(run_id), rt.settings)  # as first started
            registry.log_params(logged.params)
            registry.set_tags(logged.tags())
            registry.log_metrics(measured(clock, calls))
            registry.log_text(mask(f"{type(error).__name__}: {error}"), "error.txt")
            raise _EndFailed
    except _EndFailed:
        pass
    except Exception as failure:  # the registry itself may be what failed
        log.error("could not record the failed night in MLflow: %s", failure)
