"""A file the user names (a skill) as a component: seeded from the file, sent in place of
what the traces recorded for its variable, published into the config of the prompts that
use it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from infra.agents.file_components import load_files, variable_of
from infra.agents.prompt_config import split
from infra.agents.replay import ReplayAgent
from infra.traces.managed_prompts import managed_prompt_from_langfuse
from tests.fakes import ScriptedLM
from tests.infra.agents.test_replay import records

PLANNER = managed_prompt_from_langfuse(
    {
        "name": "planner",
        "version": 1,
        "type": "chat",
        "prompt": [
            {"role": "system", "content": "Plan the trip.\n\n{{skill}}"},
            {"role": "user", "content": "{{request}}"},
        ],
        "labels": ["production"],
    }
)
RECORDED_SKILL = "Old skill: always fly."


def trace() -> list[dict]:
    variables = {"skill": RECORDED_SKILL, "request": "Paris to Lyon"}
    return [
        {
            "id": "o1",
            "traceId": "t1",
            "type": "GENERATION",
            "name": "planner",
            "startTime": datetime(2026, 12, 1, tzinfo=UTC).isoformat(),
            "promptName": "planner",
            "promptVersion": 1,
            "input": PLANNER.render(PLANNER.text, variables),
            "output": "Fly.",
            "metadata": {"prompt_variables": variables},
        }
    ]


def test_a_named_file_is_read_and_a_missing_one_is_named(tmp_path):
    (tmp_path / "skill.md").write_text("Take the train under 500 km.")
    assert load_files({"skill": "skill.md"}, root=tmp_path) == {
        "skill": "Take the train under 500 km."
    }
    with pytest.raises(ValueError, match=r"replay.component_files.skill: cannot read .*gone.md"):
        load_files({"skill": "gone.md"}, root=tmp_path)


async def test_the_candidates_file_text_fills_its_variable_in_every_replayed_call():
    agent = ReplayAgent({"planner": PLANNER}, files={"skill": "Take the train under 500 km."})
    seed = agent.seed_prompts()
    assert seed["files.skill"] == "Take the train under 500 km." and variable_of("files.skill")
    (record,) = records(trace())
    example = agent.example_from_trace(record)
    assert example.inputs == {"request": "Paris to Lyon"}  # the file is no task input
    lm = ScriptedLM(lambda m: "Train.")
    await agent.run(example, seed | {"files.skill": "Walk."}, lm)
    assert lm.calls[0][0]["content"] == "Plan the trip.\n\nWalk."
    assert RECORDED_SKILL not in str(lm.calls[0])


def test_a_file_goes_into_the_config_of_each_prompt_that_uses_it():
    candidate = {"planner": "Plan.", "writer": "Write.", "files.skill": "Walk."}
    texts, config = split(candidate, {"planner": ["skill", "request"], "writer": ["request"]})
    assert texts == {"planner": "Plan.", "writer": "Write."}
    assert config == {"planner": {"files": {"skill": "Walk."}}}
