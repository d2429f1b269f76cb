"""Replaying Langfuse-managed prompts from traces: rendering with recorded variables, step
by step with upstream outputs, tools never re-run, and credit on the step that failed."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError

from examples.request_reply.prompts import CLASSIFY_PROMPT, REPLY_PROMPT
from flows.night.collect import collect, one_record_per_trace, summarize
from flows.night.runtime import Runtime
from gepa_opt import GEPAConfig, optimize
from infra.agents.contract import check_agent
from infra.agents.replay import NOT_REPLAYABLE, ReplayAgent
from infra.labels import LabelStore
from infra.lm.openai_lm import OpenAILM
from infra.settings import LMSettings, Settings
from infra.traces.errors import RecordError
from infra.traces.managed_prompts import (
    infer_variables,
    managed_prompt_from_langfuse,
    read_prompt_file,
)
from infra.traces.mapping import trace_from_observation
from infra.traces.source import TraceBatch, TraceSourceError
from judges.agent_metric import AgentJudgeAdapter
from tests.fake_openai import chat_completion
from tests.fakes import ScriptedLM

T0 = datetime(2026, 11, 30, 9, tzinfo=UTC)

CLASSIFY = managed_prompt_from_langfuse(
    {
        "name": "classify-request",
        "version": 3,
        "type": "text",
        "prompt": "Which kind of request is this? {{request}}\nKind:",
        "labels": ["production"],
    }
)
REPLY = managed_prompt_from_langfuse(
    {
        "name": "write-reply",
        "version": 1,
        "type": "chat",
        "prompt": [
            {"role": "system", "content": "Reply in one friendly sentence."},
            {"role": "user", "content": "Request: {{request}}\nKind: {{kind}}"},
        ],
        "labels": ["production"],
    }
)
PROMPTS = {"classify-request": CLASSIFY, "write-reply": REPLY}


def model(messages: list[dict[str, str]]) -> str:
    """A deterministic stand-in: classifies by keyword, and replies with the kind it was
    given, unless its instructions carry a planted defect."""
    text = messages[-1]["content"]
    if text.startswith("Which kind"):
        return "weather" if "rain" in text else "music"
    system = messages[0]["content"] if messages[0]["role"] == "system" else ""
    kind = text.rsplit("Kind: ", 1)[-1]
    return "I cannot help." if "DEFECT" in system else f"Sure, I'll handle that {kind} request."


def observation(trace: str, n: int, name: str, prompt=None, variables=None, **fields) -> dict:
    record = {
        "id": f"{trace}-{n}",
        "traceId": trace,
        "type": "GENERATION",
        "name": name,
        "startTime": (T0 + timedelta(seconds=n)).isoformat(),
        "model": "smollm2-135m-instruct",
    }
    if prompt is not None:
        record |= {"promptName": prompt.name, "promptVersion": prompt.version}
    if variables is not None:
        record["metadata"] = {"prompt_variables": variables}
    return record | fields


def two_step_trace(trace: str, request: str, record_variables: bool = True) -> list[dict]:
    """A trace as the agent made it with the production prompts and `model`."""
    asked = {"request": request}
    sent1 = CLASSIFY.render(CLASSIFY.text, asked)
    kind = model(sent1)
    both = asked | {"kind": kind}
    sent2 = REPLY.render(REPLY.text, both)
    return [
        observation(trace, 0, "handle-request", type="SPAN", input=asked),
        observation(
            trace, 1, "classify-request", CLASSIFY, asked if record_variables else None,
            input=sent1, output={"role": "assistant", "content": kind},
            modelParameters={"max_tokens": 8},
        ),
        observation(
            trace, 2, "write-reply", REPLY, both if record_variables else None,
            input=sent2, output=model(sent2),
        ),
    ]  # fmt: skip


def records(observations: list[dict]):
    return one_record_per_trace([trace_from_observation(o) for o in observations], [])


def test_text_and_chat_prompts_render_with_recorded_variables_as_langfuse_compiles_them():
    assert CLASSIFY.render(CLASSIFY.text, {"request": "will it rain"}) == [
        {"role": "user", "content": "Which kind of request is this? will it rain\nKind:"}
    ]
    chat = REPLY.render("Be brief.", {"request": "play jazz", "kind": "music"})
    assert chat == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Request: play jazz\nKind: music"},
    ]
    # a rewritten text that dropped a variable still carries the task's input
    dropped = CLASSIFY.render("Name the kind.", {"request": "will it rain"})
    assert dropped[0]["content"] == "Name the kind.\n\nrequest: will it rain"


def test_variables_not_recorded_are_read_back_from_the_chat_sent():
    sent = REPLY.render(REPLY.text, {"request": "play {{x}} now", "kind": "music"})
    assert infer_variables(REPLY, sent) == {"request": "play {{x}} now", "kind": "music"}
    assert infer_variables(REPLY, [{"role": "user", "content": "something else"}]) is None


@pytest.mark.parametrize("recorded", [True, False])
def test_replay_with_the_recorded_prompts_reproduces_the_recorded_outputs(recorded):
    (trace,) = records(two_step_trace("t1", "will it rain in Oslo", recorded))
    agent = ReplayAgent(PROMPTS)
    example = agent.example_from_trace(trace)
    assert example.inputs == {"request": "will it rain in Oslo"}
    lm = ScriptedLM(model)
    rollout = asyncio.run(agent.run(example, agent.seed_prompts(), lm))
    assert rollout.output == trace.output_text
    assert [s.name for s in rollout.steps] == ["classify-request", "write-reply"]
    assert [s.messages for s in rollout.steps] == [t.messages for t in trace.steps]


def test_a_step_downstream_of_a_changed_prompt_gets_the_new_upstream_output():
    (trace,) = records(two_step_trace("t1", "will it rain in Oslo"))
    agent = ReplayAgent(PROMPTS)
    changed = agent.seed_prompts() | {"classify-request": "Classify: {{request}}"}
    rollout = asyncio.run(
        agent.run(agent.example_from_trace(trace), changed, ScriptedLM(lambda m: "chess"))
    )
    assert rollout.steps[1].messages[-1]["content"] == "Request: will it rain in Oslo\nKind: chess"


def test_a_declared_source_wins_over_an_inferred_one():
    observations = two_step_trace("t1", "play jazz")
    observations[2]["metadata"]["prompt_variable_sources"] = {"kind": "classify-request"}
    observations[2]["metadata"]["prompt_variables"]["kind"] = "MUSIC (normalized)"
    (trace,) = records(observations)
    plan = ReplayAgent(PROMPTS).plan(trace)
    assert plan.steps[plan.order[-1]].sources == {"kind": 0}


def tool_trace(arguments_from_step: bool) -> list[dict]:
    """classify -> a weather tool -> reply reading the tool's output."""
    first, classify, _ = two_step_trace("t2", "will it rain in Oslo")
    kind = classify["output"]["content"]
    tool_input = {"city": "Oslo", "kind": kind} if arguments_from_step else {"city": "Oslo"}
    forecast = "rain, 9 degrees"
    both = {"request": "will it rain in Oslo", "kind": forecast}
    sent = REPLY.render(REPLY.text, both)
    return [
        first,
        classify,
        observation("t2", 2, "forecast", type="TOOL", input=tool_input, output=forecast),
        observation("t2", 3, "write-reply", REPLY, both, input=sent, output=model(sent)),
    ]


def test_tools_are_never_called_their_recorded_output_is_reused():
    (trace,) = records(tool_trace(arguments_from_step=False))
    agent = ReplayAgent(PROMPTS)
    example = agent.example_from_trace(trace)
    lm = ScriptedLM(model)
    rollout = asyncio.run(agent.run(example, agent.seed_prompts(), lm))
    # only the reply step is sent: the tool's output is the recorded one, and the
    # classify step is not run since nothing the reply reads depends on it
    assert len(lm.calls) == 1
    assert "Kind: rain, 9 degrees" in lm.calls[0][-1]["content"]
    assert rollout.output == trace.output_text


def test_a_tool_that_would_see_other_arguments_makes_the_trace_not_replayable():
    (trace,) = records(tool_trace(arguments_from_step=True))
    with pytest.raises(RecordError) as caught:
        ReplayAgent(PROMPTS).example_from_trace(trace)
    assert caught.value.field == NOT_REPLAYABLE
    assert "tool forecast took the output of step classify-request" in str(caught.value)
    collected = collect(
        TraceBatch(traces=[trace_from_observation(o) for o in tool_trace(True)]),
        ReplayAgent(PROMPTS),
        "correct",
    )
    assert collected.examples == []
    assert [s.field for s in collected.skipped] == [NOT_REPLAYABLE]
    assert summarize(collected)["not_replayable"] == 1  # the night's report counts it


def test_collect_reads_each_trace_as_its_last_generation_with_every_step(tmp_path):
    observations = two_step_trace("t1", "play jazz") + two_step_trace("t3", "rain today?")
    batch = TraceBatch(traces=[trace_from_observation(o) for o in observations])
    collected = collect(batch, ReplayAgent(PROMPTS), "correct")
    assert [e.id for e in collected.examples] == ["t1", "t3"]
    assert collected.outputs["t1"] == observations[2]["output"]
    # a label's trace is kept with its steps, so a later night can still replay it
    (trace, _) = records(observations)
    store = LabelStore(tmp_path / "labels.sqlite")
    label = _label("t1")
    store.add([label], [trace])
    ((_, kept),) = store.labels("correct")
    assert [s.name for s in kept.steps] == ["classify-request", "write-reply"]
    assert ReplayAgent(PROMPTS).example_from_trace(kept).inputs == {"request": "play jazz"}


def test_the_prompt_file_gives_each_production_version_and_names_a_bad_line(tmp_path):
    path = tmp_path / "prompts.jsonl"
    lines = [
        {"name": "a", "version": 1, "type": "text", "prompt": "old", "labels": []},
        {"name": "a", "version": 2, "type": "text", "prompt": "live", "labels": ["production"]},
        {"name": "a", "version": 3, "type": "text", "prompt": "draft", "labels": ["latest"]},
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines))
    assert read_prompt_file(path)["a"].text == "live"
    path.write_text(json.dumps({"name": "b", "version": 1, "type": "chat", "prompt": "x"}))
    with pytest.raises(TraceSourceError, match=r"prompts.jsonl:1: field prompt: a chat"):
        read_prompt_file(path)


def test_the_replayed_agent_fits_the_contract():
    check_agent(ReplayAgent(PROMPTS), "'replay'")


def numbered(text: str, name: str) -> str | None:
    """The number of the step called `name` in the trajectory a judge reads."""
    for line in text.splitlines():
        number, dot, rest = line.partition(". ")
        if dot and number.isdigit() and rest.split(" ")[0] == name:
            return number
    return None


class StepJudge:
    """Passes a reply that handles the request. Asked which step failed, it reads the
    numbered steps and answers write-reply's; its free-text rationale names the other
    step, so only the structured verdict can lead the optimizer to the right one."""

    async def p_pass_many(self, items):
        return [1.0 if item.output_text.startswith("Sure") else 0.0 for item in items]

    async def rationale(self, item):
        return "Fine." if item.output_text.startswith("Sure") else "Look at classify-request."

    async def choice_probabilities(self, item, question, choices):
        at = numbered(item.input_text, "write-reply")
        return [float(choice == at) for choice in choices]

    def passes(self, score: float) -> bool:
        return score >= 0.5


def test_a_defect_planted_in_step_two_is_the_component_the_optimizer_changes():
    traces = records(
        [o for n in range(8) for o in two_step_trace(f"t{n}", f"request {n} rain" * (n % 2))]
    )
    agent = ReplayAgent(PROMPTS)
    examples = [agent.example_from_trace(t) for t in traces]
    seed = agent.seed_prompts() | {"write-reply": "Reply in one sentence. DEFECT"}
    reflected_on: list[str] = []

    async def reflection(prompt: str) -> str:
        current = prompt.split("```")[1].strip()
        reflected_on.append(current)
        return f"```\n{current.replace('DEFECT', 'Always help.')} (revised)\n```"

    adapter = AgentJudgeAdapter(agent, ScriptedLM(model), StepJudge())
    config = GEPAConfig(
        max_metric_calls=60, reflection_minibatch_size=3, module_selection="blamed", seed=1
    )
    result = asyncio.run(optimize(seed, examples, examples, adapter, reflection, config))
    best = result.best_candidate
    assert best["classify-request"] == seed["classify-request"]
    assert "DEFECT" not in best["write-reply"]
    assert result.val_aggregate_scores[result.best_idx] > result.val_aggregate_scores[0]
    # every reflection was about the blamed step's prompt, none about the sound one
    assert reflected_on and all("Reply in one sentence" in text for text in reflected_on)


def _label(trace_id: str):
    from infra.traces.mapping import annotation_from_score

    return annotation_from_score(
        {
            "id": f"s-{trace_id}",
            "traceId": trace_id,
            "name": "correct",
            "value": 1.0,
            "dataType": "BOOLEAN",
            "source": "ANNOTATION",
            "timestamp": T0.isoformat(),
        }
    )


def test_an_input_a_step_echoed_is_still_the_input_not_that_step_s_output():
    observations = two_step_trace("t1", "play jazz")
    observations[1]["output"]["content"] = "play jazz"  # the model repeated the request
    observations[2]["metadata"]["prompt_variables"]["kind"] = "play jazz"
    (trace,) = records(observations)
    plan = ReplayAgent(PROMPTS).plan(trace)
    assert plan.steps[-1].sources == {"kind": 0}  # request stays the recorded input


EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "request_reply"


def test_agent_replay_reads_the_prompts_the_traces_used_from_the_export(tmp_path):
    settings = Settings(
        state_dir=tmp_path, agent="replay", traces={"jsonl_dir": str(EXAMPLE / "traces")}
    )
    seeds = Runtime(settings).agent.seed_prompts()
    assert set(seeds) == {"classify-request", "write-reply"}
    assert seeds["write-reply"] == REPLY_PROMPT[0]["content"]  # a chat prompt's system turn
    assert seeds["classify-request"] == CLASSIFY_PROMPT


def test_agent_replay_without_the_prompts_says_where_they_go(tmp_path):
    export = tmp_path / "export"
    export.mkdir()
    (export / "observations.jsonl").write_text(
        "\n".join(json.dumps(o) for o in two_step_trace("t1", "play jazz"))
    )
    settings = Settings(state_dir=tmp_path, agent="replay", traces={"jsonl_dir": str(export)})
    with pytest.raises(TraceSourceError, match="No prompts.jsonl in .*Langfuse's prompt API"):
        Runtime(settings).agent  # noqa: B018


def test_each_step_can_ask_the_server_for_the_model_its_generation_recorded():
    observations = two_step_trace("t1", "play jazz")
    observations[1]["model"] = "classifier-7b"
    (trace,) = records(observations)
    asked: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        asked.append(json.loads(request.content)["model"])
        return httpx.Response(200, json=chat_completion("music", None))

    config = LMSettings(backend="openai", model="override", replay_recorded_models=True)
    lm = OpenAILM(config, transport=httpx.MockTransport(handler))
    for recorded, wanted in (
        (True, ["classifier-7b", "smollm2-135m-instruct"]),
        (False, ["override"] * 2),
    ):
        asked.clear()
        agent = ReplayAgent(PROMPTS, recorded_models=recorded)
        asyncio.run(agent.run(agent.example_from_trace(trace), agent.seed_prompts(), lm))
        assert asked == wanted
    with pytest.raises(ValidationError, match="replay_recorded_models needs backend = 'openai'"):
        LMSettings(replay_recorded_models=True)  # the local engine serves one model


def test_a_last_call_no_candidate_can_change_keeps_its_recorded_chat_and_reply():
    first, classify, _ = two_step_trace("t4", "will it rain")
    fixed = [{"role": "user", "content": "Say goodbye."}]
    observations = [
        first,
        classify,
        observation("t4", 2, "goodbye", input=fixed, output="Bye!"),  # no managed prompt
    ]
    (trace,) = records(observations)
    agent = ReplayAgent(PROMPTS)
    with pytest.raises(RecordError, match="no step of it was made from a managed prompt"):
        agent.example_from_trace(trace)  # nothing here for the optimizer to change
    observations[2]["input"] = [{"role": "user", "content": "Say goodbye about weather"}]
    (trace,) = records(observations)  # now it reads step 1's output, verbatim
    lm = ScriptedLM(model)
    rollout = asyncio.run(agent.run(agent.example_from_trace(trace), agent.seed_prompts(), lm))
    assert rollout.messages == observations[2]["input"] and rollout.output == "Bye!"
    assert len(lm.calls) == 1  # classify re-ran and said the same: goodbye is not re-sent
