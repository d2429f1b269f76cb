"""A night's model calls per stage: calls, tokens, cost and faults for the report and
MLflow, and the night ended with one sentence when a stage saw too many fail."""

from __future__ import annotations

from infra.errors import UserFacingError
from infra.lm import CallTally, StageCalls


def night_calls(tallies: list[CallTally]) -> dict[str, StageCalls]:
    """Per stage, the calls of every model the night uses (agent, judge, reflection)."""
    out: dict[str, StageCalls] = {}
    for tally in tallies:
        for name, stage in tally.stages().items():
            out[name] = out[name] + stage if name in out else stage
    return dict(sorted(out.items()))


def check_stage(stage: str, calls: StageCalls, max_failed_share: float) -> None:
    """End the night when more than `max_failed_share` of a stage's calls failed."""
    if calls.failed and calls.failed_share > max_failed_share:
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(calls.calls_failed.items()))
        raise UserFacingError(
            f"Stage {stage!r}: {calls.failed} of {calls.calls} model calls failed for good "
            f"({kinds}), more than network.max_failed_share = {max_failed_share:.0%}; check "
            "the model server, then `flywheel run --resume` the night."
        )


def call_metrics(calls: dict[str, StageCalls]) -> dict[str, float]:
    """Flat numbers for MLflow per stage: calls, tokens, cost, failed attempts and calls."""
    out: dict[str, float] = {}
    for stage, c in calls.items():
        out[f"model_calls_{stage}"] = float(c.calls)
        out[f"model_prompt_tokens_{stage}"] = float(c.prompt_tokens)
        out[f"model_completion_tokens_{stage}"] = float(c.completion_tokens)
        out[f"model_cost_usd_{stage}"] = c.cost_usd
        out[f"model_attempts_failed_{stage}"] = float(sum(c.attempts_failed.values()))
        out[f"model_calls_failed_{stage}"] = float(c.failed)
    return out
