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
from infra.agents.tool_components import tool_of
from infra.lm import LM
from infra.types import Example, Rollout
from judges.addressing import addresses_judge
from judges.calls import NO_REASON, Done, answered, counted, each, for_gepa
from judges.trajectory import failed_step_choices, failed_step_question, judged_request
from judges.types import JudgedItem, render_inputs


class RolloutJudge(Protocol):
    """What scores a rollout: `PointwiseJudge` or `ScaledMetric`."""

    async def p_pass_many(self, items: list[JudgedItem]) -> list[float | None]: ...

    async def rationale(self, item: JudgedItem) -> str: ...

    async def choice_probabilities(
        self, item: JudgedItem, question: str, choices: list[str]
    ) -> list[float]: ...

    def passes(self, score: float) -> bool: ...


def judged_item(rollout: Rollout) -> JudgedItem:
    """The rollout as the judge reads it: its request and trajectory, and its reply."""
    request = judged_request(rollout.example, rollout.steps)
    return JudgedItem(rollout.example.id, request, rollout.output)


async def judge_rollouts(
    judge: RolloutJudge, rollouts: list[Rollout], done: Done | None = None
) -> list[Rollout]:
    """The rollouts the judge scored, each with its score: its probability of a pass, or
    its verdict placed in [0, 1]; one whose judging call failed for good is left out.
    `done(1)` as each is judged."""
    probs = await counted([judged_item(r) for r in rollouts], judge.p_pass_many, done)
    scored, probs = answered(rollouts, probs)
    for rollout, p in zip(scored, probs, strict=True):
        rollout.score = p
    return scored


def steps_text(rollout: Rollout) -> str:
    """Every step of a multi-step run, named, with what it was asked and what it said:
    what the reflection and the judge's rationale read to tell which module failed."""
    lines = []
    for number, step in enumerate(rollout.steps, start=1):
        if step.component and not step.messages:  # a replayed tool call's result
            kind = f"tool, described by {step.component}"
        elif step.component:
            kind = f"prompt {step.component}"
        else:
            kind = "recorded output, not re-run"
        asked = [m["content"] for m in step.messages if m.get("role") == "user"]
        lines.append(f"Step {number}, {step.name} ({kind})")
        if asked:
            lines.append(f"  asked: {asked[-1]}")
        lines.append(f"  answered: {step.output.strip()}")
    return "\n".join(lines)


class AgentJudgeAdapter(Adapter):
    def __init__(self, agent: Agent, lm: LM, judge: RolloutJudge, **run_params: Any):
        self.agent = agent
        self.lm = lm
        self.judge = judge
        self.run_params = run_params
        self._rationales: dict[tuple[str, str, str], str] = {}  # a parent is reflected on again
        self.refused = 0  # proposed prompts that addressed the judge

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
        rationales = await self._rationales_of(rollouts)
        records = []
        for r, why in zip(rollouts, rationales, strict=True):
            record = {"Inputs": render_inputs(r.example.inputs)}
            if r.steps:
                record["Steps"] = steps_text(r)
            verdict = "passed" if self.judge.passes(r.score) else "failed"
            feedback = f"The judge {verdict} this reply (p={r.score:.2f}). {why or NO_REASON}"
            records.append(record | {"Generated Outputs": r.output, "Feedback": feedback})
        return {component: records for component in components_to_update}

    def refuses(self, component: str, text: str, current: str) -> str | None:
        """A candidate prompt that addresses the judge is no candidate (`judges.addressing`)."""
        phrase = addresses_judge(text, current)
        if phrase is None:
            return None
        self.refused += 1
        return f"the {component} prompt addresses the judge ({phrase!r})"

    async def blame(
        self, candidate: dict[str, str], eval_batch: EvaluationBatch
    ) -> dict[str, float]:
        """Per component, how surely the judge put the first failure of each failed run at
        a step the component made (its prompt's call, or a tool call its description
        offered), or at a tool it describes that the run should have called and never did:
        the judge's structured verdict, read from its answer's probabilities."""
        rollouts: list[Rollout] = eval_batch.trajectories or []
        failed = [r for r in rollouts if r.steps and not self.judge.passes(r.score)]
        blame: dict[str, float] = {}
        for verdict in await each(failed, self._failed_step):
            for owner, p in verdict or []:  # None: one choice, or the call failed
                if owner is not None:
                    blame[owner] = blame.get(owner, 0.0) + p
        return blame

    async def _failed_step(self, rollout: Rollout) -> list[tuple[str | None, float]] | None:
        """Each choice's owner (the component it credits) with P(the run went wrong first
        there), over the run's steps and its uncalled tools."""
        uncalled = _uncalled_tools(rollout)
        choices = failed_step_choices(rollout.steps, list(uncalled))
        if len(choices) < 2:
            return None
        question = failed_step_question(list(uncalled))
        probs = await self.judge.choice_probabilities(judged_item(rollout), question, choices)
        owners = [s.component for s in rollout.steps] + list(uncalled.values())
        return list(zip(owners, probs, strict=True))

    async def _rationales_of(self, rollouts: list[Rollout]) -> list[str | None]:
        """The judge's rationale per rollout, each asked once however often it is reflected on."""
        if len(self._rationales) > 4096:  # a long run's parents are long gone
            self._rationales.clear()
        items = [judged_item(r) for r in rollouts]
        keys = [(i.id, i.input_text, i.output_text) for i in items]
        wanted = {k: i for k, i in zip(keys, items, strict=True) if k not in self._rationales}
        found = await each(list(wanted.values()), self.judge.rationale)
        # a failed call is not kept: the reflection asks again
        self._rationales.update((k, why) for k, why in zip(wanted, found, strict=True) if why)
        return [self._rationales.get(k) for k in keys]


def _uncalled_tools(rollout: Rollout) -> dict[str, str]:
    """Tool name -> its description component, for each tool the run's prompts were
    offered (a description in its candidate) that no step of the run called."""
    prompts = {s.component for s in rollout.steps if s.messages}
    called = {s.name for s in rollout.steps if not s.messages}
    return {
        found[1]: component
        for component in rollout.prompts
        if (found := tool_of(component)) and found[0] in prompts and found[1] not in called
    }
