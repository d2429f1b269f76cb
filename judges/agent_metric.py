"""The aligned judge as the metric of an agent's prompts.

The score per example is the judge's probability that the reply passes (or, for a judge
on another scale, its verdict placed in [0, 1]: `judges.scaled_metric`): it keeps the
ranking a small judge can give, where a thresholded verdict would throw it away. The
judge's rationale (generated only for the reflective minibatch) is the feedback.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from gepa_opt import Adapter, CallFailed, EvaluationBatch
from infra.agents import Agent
from infra.lm import LM
from infra.types import Example, Rollout
from judges.calls import NO_REASON, answered, each, for_gepa
from judges.types import JudgedItem, render_inputs


class RolloutJudge(Protocol):
    """What scores a rollout: `PointwiseJudge` or `ScaledMetric`."""

    async def p_pass_many(self, items: list[JudgedItem]) -> list[float | None]: ...

    async def rationale(self, item: JudgedItem) -> str: ...

    def passes(self, score: float) -> bool: ...


def judged_item(rollout: Rollout) -> JudgedItem:
    return JudgedItem(rollout.example.id, render_inputs(rollout.example.inputs), rollout.output)


async def judge_rollouts(judge: RolloutJudge, rollouts: list[Rollout]) -> list[Rollout]:
    """The rollouts the judge scored, each with its score: its probability of a pass, or
    its verdict placed in [0, 1]; one whose judging call failed for good is left out."""
    probs = await judge.p_pass_many([judged_item(r) for r in rollouts])
    scored, probs = answered(rollouts, probs)
    for rollout, p in zip(scored, probs, strict=True):
        rollout.score = p
    return scored


class AgentJudgeAdapter(Adapter):
    def __init__(self, agent: Agent, lm: LM, judge: RolloutJudge, **run_params: Any):
        self.agent = agent
        self.lm = lm
        self.judge = judge
        self.run_params = run_params

    async def evaluate(
        self, batch: list[Example], candidate: dict[str, str], capture_traces: bool = False
    ) -> EvaluationBatch:
        rollouts = await asyncio.gather(
            *(for_gepa(self.agent.run(ex, candidate, self.lm, **self.run_params)) for ex in batch)
        )
        if len(await judge_rollouts(self.judge, list(rollouts))) < len(rollouts):
            raise CallFailed(f"the judge's call failed on {[ex.id for ex in batch]}")
        return EvaluationBatch(
            outputs=[r.output for r in rollouts],
            scores=[float(r.score) for r in rollouts],
            trajectories=list(rollouts) if capture_traces else None,
        )

    async def make_reflective_dataset(
        self,
        candidate: dict[str, str],
        eval_batch: EvaluationBatch,
        components_to_update: list[str],
    ) -> dict[str, list[dict[str, Any]]]:
        rollouts: list[Rollout] = eval_batch.trajectories or []
        rationales = await each([judged_item(r) for r in rollouts], self.judge.rationale)
        records = [
            {
                "Inputs": render_inputs(r.example.inputs),
                "Generated Outputs": r.output,
                "Feedback": (
                    f"The judge {'passed' if self.judge.passes(r.score) else 'failed'} "
                    f"this reply (p={r.score:.2f}). {why or NO_REASON}"
                ),
            }
            for r, why in zip(rollouts, rationales, strict=True)
        ]
        return {component: records for component in components_to_update}
