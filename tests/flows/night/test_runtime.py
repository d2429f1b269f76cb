"""The runtime builds each distinct model once."""

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
