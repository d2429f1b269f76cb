"""The Agent contract, checked at start: every misfit named at once, and an agent that
declared live tools refused before the night calls it."""

from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest

from flows.nightly import _night
from infra.agents import load_agent
from infra.agents.contract import (
    AgentContractError,
    AgentRefused,
    check_agent,
    demonstrations_component,
    runs_offline,
)
from infra.traces import RecordError, TraceRecord


class Smallest:
    """The README's smallest agent, give or take the model call."""

    name = "smallest"

    def seed_prompts(self):
        return {"instructions": "Answer in one word."}

    def example_from_trace(self, trace):
        return trace

    async def run(self, example, prompts, lm, **params):
        return None

    def reference_score(self, example, output):
        return None


def test_the_demo_agent_and_the_smallest_one_fit():
    agent = load_agent("infra.agents.intent_router:make_agent")
    assert runs_offline(agent)
    check_agent(Smallest(), "Smallest")  # raises if not
    assert runs_offline(Smallest())  # undeclared: a plain LLM call


def test_every_misfit_is_named_in_one_error():
    class Broken(Smallest):
        name = ""
        runs_offline = "yes"
        judge_rubric = "  "
        example_from_trace = None

        def run(self, example, prompts, lm, temperature=0.0):  # not async, no max_tokens
            return None

        def reference_score(self, example):
            return None

    with pytest.raises(AgentContractError) as caught:
        check_agent(Broken(), "'my.agent:make'")
    text = str(caught.value)
    assert text.startswith("agent 'my.agent:make' (Broken) does not fit")
    for misfit in (
        "name must be a non-empty str, got ''",
        "missing example_from_trace(trace)",
        "run cannot be called as run(example, prompts, lm, temperature=..., max_tokens=...",
        "run must be `async def`",
        "reference_score cannot be called as reference_score(example, output)",
        "runs_offline must be a bool, got 'yes'",
        "judge_rubric must be a non-empty str or absent, got '  '",
    ):
        assert misfit in text


def test_seed_prompts_must_be_text_components():
    class Numbers(Smallest):
        def seed_prompts(self):
            return {"instructions": 3}

    with pytest.raises(AgentContractError, match=r"seed_prompts\(\)\['instructions'\] must be"):
        check_agent(Numbers(), "Numbers")

    class Empty(Smallest):
        def seed_prompts(self):
            return {}

    with pytest.raises(AgentContractError, match="non-empty dict of str, got {}"):
        check_agent(Empty(), "Empty")


def test_declared_demonstrations_must_name_a_seed_prompt_and_be_writable():
    class Shows(Smallest):
        demonstrations = "examples"

    with pytest.raises(AgentContractError) as caught:
        check_agent(Shows(), "Shows")
    text = str(caught.value)
    assert "demonstrations must name one of its seed prompts ['instructions']" in text

    class Unwritten(Smallest):
        demonstrations = "instructions"

    with pytest.raises(AgentContractError, match=r"missing demonstration\(example, reply\)"):
        check_agent(Unwritten(), "Unwritten")

    class Writes(Unwritten):
        def demonstration(self, example, reply):
            return f"{example} -> {reply}"

    check_agent(Writes(), "Writes")
    assert demonstrations_component(Writes()) == "instructions"
    assert demonstrations_component(Smallest()) is None  # undeclared: none


async def test_an_agent_with_live_tools_is_refused_before_the_night_calls_it():
    class Online(Smallest):
        runs_offline = False

    # nothing else of the runtime exists: any stage that ran first would fail otherwise
    rt = SimpleNamespace(agent=Online(), settings=SimpleNamespace(agent="shop.agent:make"))
    with pytest.raises(AgentRefused, match="agent 'shop.agent:make' declares runs_offline"):
        await _night(rt, "n1", clock=None)


async def test_the_readmes_smallest_agent_fits_and_runs():
    readme = (Path(__file__).parents[3] / "README.md").read_text()
    code = next(b for b in readme.split("```python\n")[1:] if "# my_package/my_agent.py" in b)
    namespace: dict = {}
    exec(code.split("```")[0], namespace)  # noqa: S102 - our own README
    agent = namespace["make_agent"]()
    check_agent(agent, "the README's")
    trace = TraceRecord(
        id="o1", trace_id="t1", start_time=datetime.now(UTC),
        input=[{"role": "user", "content": "Where is my parcel?"}],
    )  # fmt: skip
    example = agent.example_from_trace(trace)
    rollout = await agent.run(example, agent.seed_prompts(), EchoLM(), temperature=0.0)
    assert rollout.output == "Where is my parcel?" and rollout.messages[0]["role"] == "system"
    with pytest.raises(RecordError, match="input"):
        agent.example_from_trace(TraceRecord(id="o2", trace_id="t2", start_time=datetime.now(UTC)))


class EchoLM:
    async def complete(self, messages, **params):
        return SimpleNamespace(text=messages[-1]["content"])
