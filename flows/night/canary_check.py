"""The night's verdict on the canary a night before it published, taken before it
optimizes, so that it starts from (and measures its own candidate against) the
production that verdict leaves.

Which label served a trace is read from the Langfuse prompt versions its generations
recorded (`Collected.served`): the canary's versions are those its model version was
published with, production's those the hub labels production now. Only traces of the
period since the canary went out count, so both groups saw the same days' traffic. A
trace is scored by its true label where people annotated it, else by the night's judge
if it passed its gate: an untrusted judge neither promotes nor rolls back, so the true
labels alone decide then (`flows.production.canary` decides on those scores).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from flows.night.collect import Collected
from flows.night.runtime import Runtime
from flows.night.tasks import stage
from flows.production import canary_release, serving
from flows.production.canary import CanaryDecision, judge_canary
from flows.production.promotion import CANARY, Move, hub_versions
from flows.report.progress import StageProgress
from judges.feedback import judge_traces
from judges.judge import Judge
from judges.scaled_metric import placed_score
from judges.trajectory import recorded_request
from judges.types import JudgedItem


@dataclass(frozen=True)
class CanaryVerdict:
    version: int  # the canary's model version
    decision: CanaryDecision


def split_traffic(
    served: dict[str, tuple[datetime, dict[str, int]]],
    canary: dict[str, int],
    production: dict[str, int],
    since: datetime | None,
) -> tuple[list[str], list[str]]:
    """(the traces the canary served, those production served), of the period since the
    canary went out: a trace is the canary's when one of its prompt versions is, else
    production's when one is production's; any other (an older version) is neither."""
    mine, theirs = [], []
    for trace_id, (started, prompts) in sorted(served.items()):
        if since is not None and started < since:
            continue
        versions = set(prompts.items())
        if versions & set(canary.items()):
            mine.append(trace_id)
        elif versions & set(production.items()):
            theirs.append(trace_id)
    return mine, theirs


async def scores_of(
    rt: Runtime, collected: Collected, judge: Judge | None, ids: list[str]
) -> dict[str, float]:
    """Trace id -> its score in [0, 1]: people's label where there is one (placed on the
    scale's order), else `judge`'s on the reply as logged (None: labelled traces only)."""
    wanted = set(ids)
    labelled = {}
    for item in collected.items:
        if item.id in wanted and item.human_value is not None:
            placed = placed_score(collected.scale, item.human_value, {})
            if placed is not None:
                labelled[item.id] = placed
    if judge is None:
        return labelled
    examples = [e for e in collected.examples + collected.heldout if e.id in wanted]
    unlabelled = [
        JudgedItem(e.id, recorded_request(e), collected.outputs[e.id])
        for e in examples
        if e.id not in labelled
    ]
    with StageProgress("judge on canary and production traces", len(unlabelled), "traces"):
        verdicts = await judge_traces(rt.judge_lm, judge, unlabelled, set())
    return verdicts.scores | labelled


@stage("judge-canary")
async def judge_canary_traffic(
    rt: Runtime, run_id: str, collected: Collected, judge: Judge, trusted: bool
) -> CanaryVerdict | None:
    """The verdict on the canary out now (None: there is none); `trusted`: the night's
    judge passed its gate."""
    model = rt.settings.registry.model_name
    version = rt.registry.get_alias(model, CANARY)
    if version is None:
        return None
    hub = rt.prompt_hub
    if hub is None:
        reason = "no prompt of the agent is managed in Langfuse, so no trace says which served it"
        return CanaryVerdict(version, CanaryDecision("keep", reason, 0, 0))
    info = rt.registry.model_version(model, version)
    canary = hub_versions(info.tags if info else {}) or {}
    production = {p.name: p.version for p in hub.production().values()}
    started = canary_release.since(rt.registry, model, version)
    mine, theirs = split_traffic(collected.served, canary, production, started)
    scores = await scores_of(rt, collected, judge if trusted else None, mine + theirs)
    decision = judge_canary(
        [scores[i] for i in mine if i in scores],
        [scores[i] for i in theirs if i in scores],
        rt.settings.promotion,
        rt.settings.seed,
    )
    if not trusted:
        note = "; the night's judge is not trusted, so true labels alone scored them"
        decision = replace(decision, reason=decision.reason + note)
    return CanaryVerdict(version, decision)


@stage("settle-canary")
async def settle_canary(rt: Runtime, run_id: str, verdict: CanaryVerdict) -> Move | None:
    """The verdict carried out: the canary promoted or rolled back (None: kept)."""
    return await canary_release.settle(
        serving.make_serving(rt.settings),
        rt.registry,
        rt.settings.registry.model_name,
        verdict.version,
        verdict.decision,
        rt.settings.promotion,
        rt.prompt_hub,
    )


def canary_line(verdict: CanaryVerdict, move: Move | None) -> str:
    """What the night did with the canary, in one sentence for its report."""
    v, decision = f"v{verdict.version}", verdict.decision
    if move is None:
        undecided = "its interval holds zero, so " if decision.gain is not None else ""
        return f"Canary {v} kept: {decision.reason}; {undecided}it keeps serving its share."
    if move.action == canary_release.ROLLED_BACK:
        stays = f"v{move.previous}" if move.previous is not None else "the seed prompts"
        return f"Canary {v} lost and was rolled back ({decision.reason}); production stays {stays}."
    if move.action in ("promoted", "unchanged"):
        return f"Canary {v} won and was promoted to production ({decision.reason})."
    return f"Canary {v} won but stays the canary: {move.reason}."
