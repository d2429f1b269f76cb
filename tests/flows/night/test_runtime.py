"""The runtime builds each distinct model once, and lets go of what it loaded."""

import threading

from flows.night.runtime import Runtime
from infra.lm.catalogue import TEACHER
from infra.settings import LMSettings, Settings, teacher


def server(port: int) -> LMSettings:
    return LMSettings(backend="openai", base_url=f"http://127.0.0.1:{port}/v1", model="m")


def test_a_teacher_that_judges_and_reflects_is_one_model():
    rt = Runtime(Settings(lm=server(1), judge_lm=server(2), reflection=server(2)))
    assert rt.judge_lm is rt.reflection_lm
    assert rt.lm is not rt.judge_lm
    # built in the other order, the same sharing
    other = Runtime(Settings(lm=server(1), judge_lm=server(2), reflection=server(2)))
    assert other.reflection_lm is other.judge_lm


def test_models_of_other_settings_stay_apart():
    rt = Runtime(Settings(lm=server(1), judge_lm=server(2), reflection=server(3)))
    assert len({id(rt.lm), id(rt.judge_lm), id(rt.reflection_lm)}) == 3


def test_the_embedded_teacher_judges_and_reflects_unless_told_otherwise(monkeypatch):
    monkeypatch.delenv("FLYWHEEL_JUDGE_LM", raising=False)
    monkeypatch.delenv("FLYWHEEL_REFLECTION", raising=False)
    settings = Settings()
    assert settings.judge_lm == settings.reflection == teacher()
    assert settings.judge_lm.model_path == TEACHER.name and settings.lm.model_path == ""
    monkeypatch.setenv("FLYWHEEL_JUDGE_LM", "null")  # the judge runs on `lm`
    assert Settings().judge_lm is None and Settings().reflection == teacher()


class Handed:
    """A model the caller built and handed in: the caller's to close."""

    closed = False

    def close(self) -> None:
        self.closed = True


def _batchers() -> int:
    return sum(t.name == "lm-batcher" and t.is_alive() for t in threading.enumerate())


def test_a_closed_runtime_lets_go_of_the_models_it_loaded_but_not_of_those_handed_in():
    handed = Handed()
    before = _batchers()
    with Runtime(Settings(), judge_lm=handed) as rt:
        loaded = rt.lm  # the embedded agent, in this process: an engine thread holds it
        assert rt.reflection_lm is loaded and _batchers() == before + 1
    assert _batchers() == before  # its thread ended: nothing holds the weights
    assert not handed.closed and rt.judge_lm is handed
    assert rt.lm is not loaded  # a later use loads it again
    rt.close()


class Resting:
    """A model that can rest, and counts how often it did."""

    def __init__(self) -> None:
        self.rested = 0

    async def rest(self) -> bool:
        self.rested += 1
        return True


async def test_the_teacher_rests_once_for_both_its_roles_and_the_agent_not_at_all():
    agent, teacher = Resting(), Resting()
    rt = Runtime(Settings(), lm=agent, judge_lm=teacher, reflection_lm=teacher)
    assert await rt.rest_models_but_agent() == 1
    assert (teacher.rested, agent.rested) == (1, 0)
    # a judge on the agent's own model: nothing else to rest
    alone = Runtime(Settings(judge_lm=None, reflection=None), lm=agent)
    assert await alone.rest_models_but_agent() == 0 and agent.rested == 0
