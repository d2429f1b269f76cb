"""The rubric a night's judge alignment starts from: the settings' rubric, else the
agent's own, else the generic one."""

from types import SimpleNamespace

from flows.night.stages import judge_seed
from infra.agents.intent_router import JUDGE_RUBRIC, LABELS, IntentRouter
from infra.settings import Settings
from judges.pointwise import SEED_JUDGE_PROMPTS
from tests.infra.agents.test_contract import Smallest


def night(agent, rubric: str | None = None) -> SimpleNamespace:
    return SimpleNamespace(settings=Settings(judge={"rubric": rubric}), agent=agent)


def test_the_settings_rubric_wins_over_the_agents():
    assert judge_seed(night(IntentRouter(), "Pass replies in French.")) == {
        "rubric": "Pass replies in French."
    }


def test_the_agents_rubric_is_the_seed_where_settings_name_none():
    assert judge_seed(night(IntentRouter())) == {"rubric": JUDGE_RUBRIC}


def test_an_agent_without_one_gets_the_generic_rubric():
    assert judge_seed(night(Smallest())) == SEED_JUDGE_PROMPTS


def test_the_demo_rubric_names_every_label_the_router_may_answer():
    assert all(f" {word} " in JUDGE_RUBRIC.replace(",", " ") for word in LABELS.values())
