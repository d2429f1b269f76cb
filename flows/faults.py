"""Model calls that failed for good, per stage of a night: counted for the report and
MLflow, and the night ended with one sentence when a stage saw too many."""

from __future__ import annotations

from infra.errors import UserFacingError
from infra.lm import FaultTally, StageFaults


def night_faults(tallies: list[FaultTally]) -> dict[str, StageFaults]:
    """Per stage, the calls of every model the night uses (agent, judge, reflection)."""
    merged = FaultTally()
    for tally in tallies:
        merged.calls.update(tally.calls)
        merged.attempts_failed.update(tally.attempts_failed)
        merged.calls_failed.update(tally.calls_failed)
    return merged.stages()


def check_stage(stage: str, faults: StageFaults, max_failed_share: float) -> None:
    """End the night when more than `max_failed_share` of a stage's calls failed."""
    if faults.failed and faults.failed_share > max_failed_share:
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(faults.calls_failed.items()))
        raise UserFacingError(
            f"Stage {stage!r}: {faults.failed} of {faults.calls} model calls failed for good "
            f"({kinds}), more than network.max_failed_share = {max_failed_share:.0%}; check "
            "the model server, then `flywheel run --resume` the night."
        )


def fault_metrics(faults: dict[str, StageFaults]) -> dict[str, float]:
    """Flat numbers for MLflow: calls, failed attempts and failed calls per stage."""
    out: dict[str, float] = {}
    for stage, f in faults.items():
        out[f"model_calls_{stage}"] = float(f.calls)
        out[f"model_attempts_failed_{stage}"] = float(sum(f.attempts_failed.values()))
        out[f"model_calls_failed_{stage}"] = float(f.failed)
    return out
