"""The agent a team gets with no code: its Langfuse-managed prompts, replayed from its traces.

Each trace is re-run step by step in its recorded order. A generation made from a managed
prompt is rendered again from the candidate's text with the variables recorded on it
(`metadata["prompt_variables"]`, or read back from the recorded chat) and sent to the
night's model (with `lm.replay_recorded_models`, to the model it recorded). A variable
whose recorded value was an earlier step's output gets that step's new output instead
(declared in `metadata["prompt_variable_sources"]` as variable -> step name, or inferred:
the value is that output verbatim, and no input an earlier step took too). Only the
steps the last reply depends on are run.

A generation offered tools (recorded as Langfuse's OpenAI integration does: `tools` beside
the messages, `tool_calls` in the reply) starts a tool loop: it, the tools it called and
the generations of the same prompt that read their results. The loop is run again as the
agent ran it: the candidate's prompt with the recorded tools, each call it asks for
answered by `tool_policy` (the recorded result of an equal call, one recorded elsewhere, a
function the user registered, or else the trajectory stops at the call), until it replies
without a call. Tools are never called live. A tool whose arguments held another replayed
step's text output (not a call of a tool loop) would see other arguments, so what reads
that tool's output cannot be replayed: the trace is left out, named, and counted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from infra.agents.file_components import component_name as file_component
from infra.agents.file_components import file_variables
from infra.agents.placeholder_components import filled, seed_placeholders
from infra.agents.tool_components import component_name, described, seed_descriptions
from infra.agents.tool_loop import run_tool_loop
from infra.agents.tool_policy import Key, ToolFunction, ToolPolicy
from infra.lm import LM
from infra.lm.tools import Tool, ToolCall, call_from, tool_name
from infra.traces.errors import RecordError
from infra.traces.managed_prompts import ChatMatch, ManagedPrompt, Message, match_chat
from infra.traces.types import GENERATION, TraceRecord
from infra.types import Example, Rollout, Step

REPLAY = "replay"  # the `agent` setting that selects this agent, and its Example metadata key
SOURCES = "prompt_variable_sources"  # metadata: variable -> the step name it came from
NOT_REPLAYABLE = "steps"  # the RecordError field of a trace that cannot be replayed
MORE_ROUNDS = 2  # a replayed tool loop may take this many rounds more than it recorded


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
    tools: tuple[dict[str, Any], ...] = ()  # the tool definitions a generation was offered
    calls: tuple[ToolCall, ...] = ()  # the tools its reply called
    turns: tuple[Message, ...] = ()  # the tool turns sent after its prompt's own messages
    fills: dict[str, tuple[Message, ...]] = field(default_factory=dict)  # its placeholders'


@dataclass(frozen=True)
class ReplayPlan:
    """A trace's steps and the order to run the ones its last reply depends on."""

    steps: tuple[RecordedStep, ...]
    order: tuple[int, ...]
    loops: dict[int, int] = field(default_factory=dict)  # step -> its tool loop's first step
    results: dict[Key, str] = field(default_factory=dict)  # recorded tool results by call


class ReplayAgent:
    """Optimizes the managed prompts the traces used; `prompts`: each one's production
    version, by Langfuse prompt name (the component's name)."""

    name = REPLAY
    runs_offline = True  # tools are never called: their recorded outputs are reused

    def __init__(
        self,
        prompts: dict[str, ManagedPrompt],
        recorded_models: bool = False,
        tool_functions: dict[str, ToolFunction] | None = None,
        tools: dict[str, list[Tool]] | None = None,
        placeholders: dict[str, dict[str, list[Message]]] | None = None,
        files: dict[str, str] | None = None,
    ):
        """`tools`: per prompt, the tools its generations were offered (`recorded_tools`),
        whose descriptions are components too (`tool_components`); `placeholders`: per
        prompt, the placeholders every call filled alike (`fixed_placeholders`), each a
        component (`placeholder_components`); `files`: variable -> the text of the file that
        fills it (`file_components`), a component too."""
        self.prompts = dict(prompts)
        self.tools = {name: found for name, found in (tools or {}).items() if name in prompts}
        self.placeholders = {p: f for p, f in (placeholders or {}).items() if p in prompts}
        self.files = dict(files or {})
        # each call asks for the model its generation recorded, not the LM's own
        self.recorded_models = recorded_models
        self.policy = ToolPolicy(tool_functions)  # fills with every planned trace's results

    def seed_prompts(self) -> dict[str, str]:
        seed = {name: prompt.text for name, prompt in self.prompts.items()}
        for name, tools in self.tools.items():
            seed |= seed_descriptions(self.prompts[name], tools)
        for name, fixed in self.placeholders.items():
            seed |= seed_placeholders(self.prompts[name], fixed)
        return seed | {file_component(variable): text for variable, text in self.files.items()}

    def example_from_trace(self, trace: TraceRecord) -> Example:
        plan = self.plan(trace)
        first = plan.steps[plan.order[0]]
        inputs = {
            name: value
            for index in plan.order
            for name, value in plan.steps[index].variables.items()
            if name not in plan.steps[index].sources and name not in self.files
        } or {"request": _last_user_text(first.sent)}
        return Example(id=trace.trace_id, inputs=inputs, metadata={REPLAY: plan})

    def plan(self, trace: TraceRecord) -> ReplayPlan:
        """The trace's steps, with where each variable came from, or RecordError naming
        why it cannot be replayed."""
        records = trace.steps or (trace,)
        steps: list[RecordedStep] = []
        for record in records:
            steps.append(self._recorded(record, steps, trace.trace_id))
        loops = _tool_loops(steps)
        order = _cone(steps, len(steps) - 1, loops)
        if not any(steps[i].prompt for i in order):
            raise RecordError(
                "promptName",
                f"trace {trace.trace_id}: no step of it was made from a managed prompt "
                f"({', '.join(sorted(self.prompts)) or 'none known'})",
            )
        _refuse_changed_tool_arguments(steps, order, trace.trace_id, loops)
        results = _recorded_results(steps, loops)
        self.policy.remember(results)
        return ReplayPlan(tuple(steps), order, loops, results)

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
        counts: Counter[str] = Counter()
        offered: list[dict[str, Any]] = []  # to the latest model call
        for index in plan.order:
            step = plan.steps[index]
            call = dict(params)
            if step.max_tokens is not None:
                call["max_tokens"] = step.max_tokens
            if self.recorded_models and step.model:
                call["model"] = step.model
            if step.tools or step.calls:  # the first step of a tool loop
                assert step.prompt is not None  # a loop starts at a managed prompt
                offered = described(list(step.tools), step.prompt, prompts)
                components = {
                    tool_name(t): c
                    for t in offered
                    if (c := component_name(step.prompt, tool_name(t))) in prompts
                }
                loop = await run_tool_loop(
                    lm,
                    step.name,
                    step.prompt,
                    self._render(step, prompts, outputs),
                    offered,
                    components,
                    self.policy,
                    plan.results,
                    _rounds(plan, index) + MORE_ROUNDS,
                    **call,
                )
                outputs[index] = loop.output
                ran += loop.steps
                counts.update(loop.answered)
                for kind, tokens in loop.usage.items():
                    usage[kind] += tokens
                if loop.stopped:  # the trajectory ends at the call nothing answered
                    break
                continue
            messages = self._messages(step, prompts, outputs, plan)
            if messages is None:  # a tool, or a fixed call nothing upstream changed
                outputs[index] = step.output
                sent = step.sent if step.kind == GENERATION else []  # a reply's chat, for SFT
                ran.append(Step(step.name, None, sent, step.output))
                continue
            completion = await lm.complete(messages, **call)
            offered = []
            outputs[index] = completion.text.strip()
            _add_usage(usage, completion)
            ran.append(Step(step.name, step.prompt, messages, completion.text))
        # a tool loop's result steps come after its last model call, which made the output
        last = next((s for s in reversed(ran) if s.messages), ran[-1])
        return Rollout(
            example,
            prompts,
            last.output,
            last.messages,
            usage=usage,
            steps=ran,
            tool_steps=dict(counts),
            tools=offered,
        )

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
            return self._render(step, prompts, outputs)
        changed = {i: outputs[i] for i in step.sources.values() if outputs[i] != _recorded(plan, i)}
        if not changed:
            return None
        sent = step.sent
        for index, text in changed.items():  # a fixed call re-sent with new upstream text
            old = _recorded(plan, index)
            sent = [{**m, "content": m["content"].replace(old, text)} for m in sent]
        return sent

    def _render(
        self, step: RecordedStep, prompts: dict[str, str], outputs: dict[int, str]
    ) -> list[Message]:
        """The step's managed prompt, candidate text and all, with this run's upstream."""
        assert step.prompt is not None
        prompt = self.prompts[step.prompt]
        variables = step.variables | {v: outputs[i] for v, i in step.sources.items()}
        variables |= file_variables(prompts, prompt.variables())
        fills = step.fills | filled(step.prompt, prompts)
        return prompt.render(prompts[step.prompt], variables, fills)

    def _recorded(self, record: TraceRecord, earlier: list[RecordedStep], trace_id: str):
        sent = record.turns
        output = record.output_text.strip()
        name = record.name or record.id
        if record.type != GENERATION:
            return RecordedStep(name, record.type, output, sent, sources=_found_in(sent, earlier))
        prompt = self.prompts.get(record.prompt_name or "")
        max_tokens = _int(record.model_parameters.get("max_tokens"))
        model = record.model
        calls = tuple(c for c in map(call_from, record.tool_calls) if c is not None)
        output = output or "\n".join(c.written() for c in calls)
        tools = tuple(record.tools)
        if prompt is None:
            sources = _found_in(sent, earlier)
            return RecordedStep(
                name, GENERATION, output, sent, None, {}, sources, max_tokens, model, tools, calls
            )
        match, turns = _prompt_and_tool_turns(prompt, sent, self.placeholders.get(prompt.name))
        variables = record.prompt_variables
        if variables is None and match is not None:
            variables = match.variables
        if variables is None:
            raise RecordError(
                "metadata.prompt_variables",
                f"trace {trace_id}, step {name}: no variables recorded, and the chat it sent "
                f"does not match prompt {prompt.name!r} v{prompt.version}",
            )
        sources = _sources(record.metadata.get(SOURCES), variables, earlier, trace_id, name)
        return RecordedStep(
            name,
            GENERATION,
            output,
            sent,
            prompt.name,
            variables,
            sources,
            max_tokens,
            model,
            tools,
            calls,
            tuple(turns),
            {k: tuple(v) for k, v in match.fills.items()} if match else {},
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


def _cone(steps: list[RecordedStep], last: int, loops: dict[int, int]) -> tuple[int, ...]:
    """The steps `last` depends on, itself included, in recorded order; a step of a tool
    loop stands for the whole loop, which runs from its first step."""
    needed, todo = set(), [last]
    while todo:
        index = todo.pop()
        index = loops.get(index, index)
        if index not in needed:
            needed.add(index)
            todo += steps[index].sources.values()
    return tuple(sorted(needed))


def _tool_loops(steps: list[RecordedStep]) -> dict[int, int]:
    """Every step -> the first step of its tool loop (itself, outside any loop). A loop
    starts at a generation offered tools, made from a managed prompt, and holds the tool
    steps and the generations of that prompt that follow it with tool turns."""
    loops: dict[int, int] = {}
    start: int | None = None
    for index, step in enumerate(steps):
        opened = step.kind == GENERATION and step.prompt is not None and (step.tools or step.calls)
        if start is not None and step.kind != GENERATION:
            loops[index] = start
        elif start is not None and step.prompt == steps[start].prompt and step.turns:
            loops[index] = start
        elif opened and not step.turns:
            start = loops[index] = index
        else:
            start, loops[index] = None, index
    return loops


def _recorded_results(steps: list[RecordedStep], loops: dict[int, int]) -> dict[Key, str]:
    """The result each recorded call of a tool loop got: the tool turn answering its id in
    a later generation's chat, else the next tool step of its name."""
    results: dict[Key, str] = {}
    answered = {
        t["tool_call_id"]: t["content"]
        for s in steps
        for t in s.turns
        if t.get("role") == "tool" and t.get("tool_call_id")
    }
    tool_steps = [i for i, s in enumerate(steps) if s.kind != GENERATION and loops[i] != i]
    for index, step in enumerate(steps):
        for call in step.calls:
            if call.id and call.id in answered:
                results.setdefault(call.key(), answered[call.id])
                continue
            later = [i for i in tool_steps if i > index and steps[i].name == call.name]
            if later:
                tool_steps.remove(later[0])
                results.setdefault(call.key(), steps[later[0]].output)
    return results


def _prompt_and_tool_turns(
    prompt: ManagedPrompt,
    sent: list[Message],
    known: Mapping[str, Sequence[Message]] | None = None,
) -> tuple[ChatMatch | None, list[Message]]:
    """How the prompt made the recorded chat (None: it does not match; `known`: fills of
    its placeholders that every call sent), and the tool turns after it (an assistant's
    calls, the tools' results) that a tool loop added."""
    end = len(sent) - _tool_tail(sent)
    match = match_chat(prompt, sent, end, known)
    return (match if match is not None and match.used == end else None), sent[end:]


def _tool_tail(sent: list[Message]) -> int:
    """How many turns at the chat's end a tool loop added: assistant calls and results,
    ending with a result."""
    count = 0
    for turn in reversed(sent):
        if turn.get("role") != "tool" and not turn.get("tool_calls"):
            break
        count += 1
    return count if count and sent[-1].get("role") == "tool" else 0


def recorded_steps(example: Example) -> list[Step]:
    """The steps a replayed example's trace recorded, as a replay of it reports its own
    (`ReplayAgent.run`: the steps its last reply depends on, a tool loop's calls written
    as the replay writes them): what a judge reads of the trace as logged. Empty for an
    example of another agent."""
    plan = example.metadata.get(REPLAY)
    if not isinstance(plan, ReplayPlan):
        return []
    steps = []
    for index in plan.order:
        for member in (i for i in range(len(plan.steps)) if plan.loops.get(i, i) == index):
            step = plan.steps[member]
            if step.kind != GENERATION:
                steps.append(Step(step.name, None, [], step.output))
                continue
            calls = [c.written() for c in step.calls]
            said = "" if step.output == "\n".join(calls) else step.output
            steps.append(Step(step.name, step.prompt, step.sent, "\n".join([said, *calls]).strip()))
    return steps


def fixed_placeholders(
    traces: list[TraceRecord], prompts: dict[str, ManagedPrompt]
) -> dict[str, dict[str, list[Message]]]:
    """Per managed prompt, each placeholder that every recorded call of it filled with
    the same messages (none at all: no component). Of two placeholders side by side
    (few-shot turns, then a conversation's history), the earlier's fill is what every
    call sent first there alike."""
    seen: dict[str, dict[str, list[list[Message]]]] = {}
    for trace in traces:
        for record in trace.steps or (trace,):
            prompt = prompts.get(record.prompt_name or "")
            if record.type != GENERATION or prompt is None or not prompt.placeholders():
                continue
            match, _ = _prompt_and_tool_turns(prompt, record.turns)
            for name, fill in (match.fills if match else {}).items():
                seen.setdefault(prompt.name, {}).setdefault(name, []).append(fill)
    for name, by_name in seen.items():
        _split_side_by_side(prompts[name], by_name)
    return {
        prompt: fixed
        for prompt, by_name in seen.items()
        if (fixed := {n: f[0] for n, f in by_name.items() if f[0] and all(x == f[0] for x in f)})
    }


def _split_side_by_side(prompt: ManagedPrompt, fills: dict[str, list[list[Message]]]) -> None:
    """A placeholder right before another took nothing in each call (`match_chat`): give
    it the messages every call sent first there alike, and the later one the rest."""
    names = [m.get("name") for m in prompt.template(prompt.text)]
    for earlier, later in zip(names, names[1:], strict=False):
        if earlier is None or later is None or later not in fills:
            continue
        runs = fills[later]
        shared = 0
        while all(len(r) > shared and r[shared] == runs[0][shared] for r in runs):
            shared += 1
        fills[earlier] = [r[:shared] for r in runs]
        fills[later] = [r[shared:] for r in runs]


def recorded_tools(traces: list[TraceRecord]) -> dict[str, list[Tool]]:
    """Per managed prompt, the tools its generations were offered (the first definition
    of each tool name seen)."""
    found: dict[str, dict[str, Tool]] = {}
    for trace in traces:
        for record in trace.steps or (trace,):
            if record.type == GENERATION and record.prompt_name:
                for tool in record.tools:
                    found.setdefault(record.prompt_name, {}).setdefault(tool_name(tool), tool)
    return {prompt: list(tools.values()) for prompt, tools in found.items()}


def _rounds(plan: ReplayPlan, start: int) -> int:
    """How many generations the recorded tool loop starting at `start` made."""
    return sum(
        1 for i, s in enumerate(plan.steps) if plan.loops.get(i) == start and s.kind == GENERATION
    )


def _add_usage(usage: dict[str, int], completion) -> None:
    usage["prompt_tokens"] += completion.usage.prompt_tokens
    usage["completion_tokens"] += completion.usage.completion_tokens


def _refuse_changed_tool_arguments(
    steps: list[RecordedStep], order: tuple[int, ...], trace_id: str, loops: dict[int, int]
) -> None:
    """A tool whose arguments held the text output of a step a candidate can change would
    be called with other arguments: its recorded output says nothing about that call. (A
    tool loop's calls are answered by the tool policy instead.)"""
    changeable: set[int] = set()
    for index in order:
        step = steps[index]
        if loops[index] != index:
            continue
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
