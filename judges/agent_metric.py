"""The aligned judge as the metric of an agent's prompts.

The score per example is the judge's probability that the reply passes (or, for a judge
on another scale, its verdict placed in [0, 1]: `judges.scaled_metric`): it keeps the
ranking a small judge can give, where a thresholded verdict would throw it away. The
judge's rationale (generated only for the reflective minibatch) is the feedback.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from gepa_opt import Adapter, EvaluationBatch
from infra.agents import Agent
from infra.lm import LM
from infra.types import Example, Rollout
from judges.types import JudgedItem, render_inputs


class RolloutJudge(Protocol):
    """What scores a rollout: `PointwiseJudge` or `ScaledMetric`."""

    async def p_pass_many(self, items: list[JudgedItem]) -> list[float]: ...

    async def rationale(self, item: JudgedItem) -> str: ...

    def passes(self, score: float) -> bool: ...


def judged_item(rollout: Rollout) -> JudgedItem:
    return JudgedItem(rollout.example.id, render_inputs(rollout.example.inputs), rollout.output)


async def judge_rollouts(judge: RolloutJudge, rollouts: list[Rollout]) -> list[Rollout]:
    """Fill each rollout's score with the judge's: its probability of a pass, or its
    verdict placed in [0, 1]."""
    probs = await judge.p_pass_many([judged_item(r) for r in rollouts])
    for rollout, p in zip(rollouts, probs, strict=True):
        rollout.score = p
    return rollouts


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
            *(self.agent.run(ex, candidate, self.lm, **self.run_params) for ex in batch)
        )
        await judge_rollouts(self.judge, list(rollouts))
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
        rationales = await asyncio.gather(*(self.judge.rationale(judged_item(r)) for r in rollouts))
        records = [
            {
                "Inputs": render_inputs(r.example.inputs),
                "Generated Outputs": r.output,
                "Feedback": (
                    f"The judge {'passed' if self.judge.passes(r.score) else 'failed'} "
                    f"this reply (p={r.score:.2f}). {why}"
                ),
            }
            for r, why in zip(rollouts, rationales, strict=True)
        ]
        return {component: records for component in components_to_update}
