"""The agent a team gets with no code: its Langfuse-managed prompts, replayed from its traces.

Each trace is re-run step by step in its recorded order. A generation made from a managed
prompt is rendered again from the candidate's text with the variables recorded on it
(`metadata["prompt_variables"]`, or read back from the recorded chat) and sent to the
night's model (with `lm.replay_recorded_models`, to the model it recorded). A variable
whose recorded value was an earlier step's output gets that step's new output instead
(declared in `metadata["prompt_variable_sources"]` as variable -> step name, or inferred:
the value is that output verbatim, and no input an earlier step took too). Tool calls are
never re-run: their recorded outputs are reused. A tool whose arguments held a replayed
step's output would see other arguments, so what reads that tool's output cannot be
replayed: the trace is left out, named, and counted. Only the steps the last reply
depends on are run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from infra.lm import LM
from infra.traces.errors import RecordError
from infra.traces.managed_prompts import ManagedPrompt, Message, infer_variables
from infra.traces.types import GENERATION, TraceRecord
from infra.types import Example, Rollout, Step

REPLAY = "replay"  # the `agent` setting that selects this agent, and its Example metadata key
SOURCES = "prompt_variable_sources"  # metadata: variable -> the step name it came from
NOT_REPLAYABLE = "steps"  # the RecordError field of a trace that cannot be replayed


@dataclass(frozen=True)
class RecordedStep:
    """One observation of a trace, as a replay needs it."""

    name: str
    kind: str  # GENERATION or TOOL
    output: str
    sent: list[Message]  # the recorded chat (a tool's arguments as one turn)
    prompt: str | None = None  # the managed prompt (component) it was rendered from
    variables: dict[str, str] = field(default_factory=dict)
    sources: dict[str, int] = field(default_factory=dict)  # variable -> upstream step
    max_tokens: int | None = None
    model: str | None = None  # the model the generation called


@dataclass(frozen=True)
class ReplayPlan:
    """A trace's steps and the order to run the ones its last reply depends on."""

    steps: tuple[RecordedStep, ...]
    order: tuple[int, ...]


class ReplayAgent:
    """Optimizes the managed prompts the traces used; `prompts`: each one's production
    version, by Langfuse prompt name (the component's name)."""

    name = REPLAY
    runs_offline = True  # tools are never called: their recorded outputs are reused

    def __init__(self, prompts: dict[str, ManagedPrompt], recorded_models: bool = False):
        self.prompts = dict(prompts)
        # each call asks for the model its generation recorded, not the LM's own
        self.recorded_models = recorded_models

    def seed_prompts(self) -> dict[str, str]:
        return {name: prompt.text for name, prompt in self.prompts.items()}

    def example_from_trace(self, trace: TraceRecord) -> Example:
        plan = self.plan(trace)
        first = plan.steps[plan.order[0]]
        inputs = {
            name: value
            for index in plan.order
            for name, value in plan.steps[index].variables.items()
            if name not in plan.steps[index].sources
        } or {"request": _last_user_text(first.sent)}
        return Example(id=trace.trace_id, inputs=inputs, metadata={REPLAY: plan})

    def plan(self, trace: TraceRecord) -> ReplayPlan:
        """The trace's steps, with where each variable came from, or RecordError naming
        why it cannot be replayed."""
        records = trace.steps or (trace,)
        steps: list[RecordedStep] = []
        for record in records:
            steps.append(self._recorded(record, steps, trace.trace_id))
        order = _cone(steps, len(steps) - 1)
        if not any(steps[i].prompt for i in order):
            raise RecordError(
                "promptName",
                f"trace {trace.trace_id}: no step of it was made from a managed prompt "
                f"({', '.join(sorted(self.prompts)) or 'none known'})",
            )
        _refuse_changed_tool_arguments(steps, order, trace.trace_id)
        return ReplayPlan(tuple(steps), order)

    async def run(self, example: Example, prompts: dict[str, str], lm: LM, **params) -> Rollout:
        plan = example.metadata.get(REPLAY)
        if not isinstance(plan, ReplayPlan):
            raise ValueError(
                f"example {example.id}: a replayed agent runs recorded traces only; hold "
                "out a share of the traces (eval.heldout_trace_share) instead of a file"
            )
        outputs: dict[int, str] = {}
        ran: list[Step] = []
        usage = {"prompt_tokens": 0, "completion_tokens": 0}
        for index in plan.order:
            step = plan.steps[index]
            messages = self._messages(step, prompts, outputs, plan)
            if messages is None:  # a tool, or a fixed call nothing upstream changed
                outputs[index] = step.output
                sent = step.sent if step.kind == GENERATION else []  # a reply's chat, for SFT
                ran.append(Step(step.name, None, sent, step.output))
                continue
            call = dict(params)
            if step.max_tokens is not None:
                call["max_tokens"] = step.max_tokens
            if self.recorded_models and step.model:
                call["model"] = step.model
            completion = await lm.complete(messages, **call)
            outputs[index] = completion.text.strip()
            usage["prompt_tokens"] += completion.usage.prompt_tokens
            usage["completion_tokens"] += completion.usage.completion_tokens
            ran.append(Step(step.name, step.prompt, messages, completion.text))
        last = ran[-1]
        return Rollout(example, prompts, last.output, last.messages, usage=usage, steps=ran)

    def reference_score(self, example: Example, output: str) -> float | None:
        return None  # a trace has no true answer: the held-out slice is judged

    def _messages(
        self,
        step: RecordedStep,
        prompts: dict[str, str],
        outputs: dict[int, str],
        plan: ReplayPlan,
    ) -> list[Message] | None:
        if step.kind != GENERATION:
            return None
        if step.prompt is not None:
            variables = step.variables | {v: outputs[i] for v, i in step.sources.items()}
            return self.prompts[step.prompt].render(prompts[step.prompt], variables)
        changed = {i: outputs[i] for i in step.sources.values() if outputs[i] != _recorded(plan, i)}
        if not changed:
            return None
        sent = step.sent
        for index, text in changed.items():  # a fixed call re-sent with new upstream text
            old = _recorded(plan, index)
            sent = [{**m, "content": m["content"].replace(old, text)} for m in sent]
        return sent

    def _recorded(self, record: TraceRecord, earlier: list[RecordedStep], trace_id: str):
        sent = record.messages
        output = record.output_text.strip()
        name = record.name or record.id
        if record.type != GENERATION:
            return RecordedStep(name, record.type, output, sent, sources=_found_in(sent, earlier))
        prompt = self.prompts.get(record.prompt_name or "")
        max_tokens = _int(record.model_parameters.get("max_tokens"))
        model = record.model
        if prompt is None:
            sources = _found_in(sent, earlier)
            return RecordedStep(
                name, GENERATION, output, sent, None, {}, sources, max_tokens, model
            )
        variables = record.prompt_variables
        if variables is None:
            variables = infer_variables(prompt, sent)
        if variables is None:
            raise RecordError(
                "metadata.prompt_variables",
                f"trace {trace_id}, step {name}: no variables recorded, and the chat it sent "
                f"does not match prompt {prompt.name!r} v{prompt.version}",
            )
        sources = _sources(record.metadata.get(SOURCES), variables, earlier, trace_id, name)
        return RecordedStep(
            name, GENERATION, output, sent, prompt.name, variables, sources, max_tokens, model
        )


def _sources(
    declared: Any,
    variables: dict[str, str],
    earlier: list[RecordedStep],
    trace_id: str,
    name: str,
) -> dict[str, int]:
    """Per variable, the earlier step whose output it was: declared by step name, or
    inferred as the latest step whose recorded output is the value verbatim."""
    sources: dict[str, int] = {}
    if isinstance(declared, dict):  # declared: the step's whole story, nothing inferred
        for variable, step_name in declared.items():
            found = [i for i, s in enumerate(earlier) if s.name == step_name]
            if not found:
                raise RecordError(
                    f"metadata.{SOURCES}",
                    f"trace {trace_id}, step {name}: {variable!r} comes from {step_name!r}, "
                    "which ran no earlier in the trace",
                )
            sources[str(variable)] = found[-1]
        return sources
    # a value an earlier step also took as an input is that input passed along, even
    # where a step echoed it (a model repeating the request)
    inputs = {(n, v) for s in earlier for n, v in s.variables.items() if n not in s.sources}
    for variable, value in variables.items():
        if not value.strip() or (variable, value) in inputs:
            continue
        found = [i for i, s in enumerate(earlier) if s.output and s.output == value.strip()]
        if found:
            sources[variable] = found[-1]
    return sources


def _found_in(sent: list[Message], earlier: list[RecordedStep]) -> dict[str, int]:
    """The earlier steps whose recorded output a chat (or a tool's arguments) holds."""
    text = "\n".join(m["content"] for m in sent)
    return {f"step {i}": i for i, s in enumerate(earlier) if s.output and s.output in text}


def _cone(steps: list[RecordedStep], last: int) -> tuple[int, ...]:
    """The steps `last` depends on, itself included, in recorded order."""
    needed, todo = set(), [last]
    while todo:
        index = todo.pop()
        if index not in needed:
            needed.add(index)
            todo += steps[index].sources.values()
    return tuple(sorted(needed))


def _refuse_changed_tool_arguments(
    steps: list[RecordedStep], order: tuple[int, ...], trace_id: str
) -> None:
    """A tool whose arguments held the output of a step a candidate can change would be
    called with other arguments: its recorded output says nothing about that call."""
    changeable: set[int] = set()
    for index in order:
        step = steps[index]
        upstream = set(step.sources.values())
        if step.kind == GENERATION and (step.prompt is not None or upstream & changeable):
            changeable.add(index)
        elif step.kind != GENERATION and upstream & changeable:
            raise RecordError(
                NOT_REPLAYABLE,
                f"trace {trace_id}: not replayable: tool {step.name} took the output of "
                f"step {steps[min(upstream & changeable)].name} as its arguments, and "
                "tools are never re-run",
            )


def _recorded(plan: ReplayPlan, index: int) -> str:
    return plan.steps[index].output


def _last_user_text(sent: list[Message]) -> str:
    users = [m["content"] for m in sent if m.get("role") == "user"]
    return users[-1] if users else ""


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None
