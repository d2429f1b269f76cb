"""The built-in reflection meta-prompts: what the default shows a small reflection model,
what comes back out of its replies, and the knob that picks one."""

import pytest

from gepa_opt import DEFAULT_REFLECTION_PROMPT, GEPAConfig, optimize
from gepa_opt.extraction import extract_proposal
from gepa_opt.meta_prompt import (
    REFLECTION_TEMPLATES,
    REWRITE_REFLECTION_PROMPT,
    build_reflection_prompt,
)
from gepa_opt.refusal import restates_meta_prompt
from infra.settings import AgentOptSettings, JudgeSettings
from tests.gepa_opt.test_engine import KeywordAdapter, ScriptedReflector, tasks

ROUTER = (
    "You route requests for a voice assistant. Say which kind of request the user made: "
    "playlist, restaurant, weather, music, rating, search or showtimes."
)
# Two records as the night's agent metric builds them (judges/agent_metric.py).
RECORDS = [
    {
        "Inputs": "what movies are playing at Warren Theatres",
        "Generated Outputs": "The latest Marvel release:\n\nThe latest Marvel",
        "Feedback": "The judge failed this reply (p=0.00). expected showtimes; the reply "
        "named none",
    },
    {
        "Inputs": "will it be chilly at 0 pm in Guam",
        "Generated Outputs": "weather",
        "Feedback": "The judge passed this reply (p=1.00). correct: weather",
    },
]


def test_the_library_reflects_as_the_paper_and_the_night_as_the_plain_rewrite_task() -> None:
    assert GEPAConfig().template_for("instructions") == DEFAULT_REFLECTION_PROMPT
    for knobs in (AgentOptSettings(), JudgeSettings(max_metric_calls=100)):
        config = GEPAConfig(**knobs.gepa_fields())
        assert config.template_for("instructions") == REWRITE_REFLECTION_PROMPT


def test_the_rewrite_template_shows_the_instruction_then_every_record_then_the_ask() -> None:
    prompt = build_reflection_prompt(REWRITE_REFLECTION_PROMPT, ROUTER, RECORDS)
    assert prompt.startswith(
        "Rewrite this instruction so that an assistant following it would have given the "
        f"expected output for each input below.\n\nInstruction:\n{ROUTER}\n\nInputs, "
    )
    first, second = prompt.index("# Example 1\n"), prompt.index("# Example 2\n")
    assert prompt.index(ROUTER) < first < second
    assert (
        "# Example 1\n## Inputs\nwhat movies are playing at Warren Theatres\n\n"
        "## Generated Outputs\nThe latest Marvel release:\n\nThe latest Marvel\n\n"
        "## Feedback\nThe judge failed this reply (p=0.00). expected showtimes"
    ) in prompt
    assert "## Feedback\nThe judge passed this reply (p=1.00). correct: weather" in prompt
    ask = prompt[prompt.index("expected showtimes") :]
    assert ask.rstrip().endswith("not about these inputs one by one.")
    assert "<curr_instructions>" not in prompt and "<inputs_outputs_feedback>" not in prompt


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        # what the 1.5B teacher sends for the rewrite template: the text alone, unfenced
        (f"{ROUTER}\n\nTo tell such inputs apart:\n1. **Playlist**: adding songs to a "
         "playlist.", f"{ROUTER}\n\nTo tell such inputs apart:\n1. **Playlist**: adding "
         "songs to a playlist."),
        # or fenced, with words around the fence
        (f"Here is the rewritten instruction:\n```\n{ROUTER} Answer with one word.\n```\n"
         "This tells the assistant what to say.", f"{ROUTER} Answer with one word."),
        # cut off at the token limit inside its fence
        (f"```\n{ROUTER}\n- Movie times at a cinema: showtimes\n- Booking a", f"{ROUTER}\n"
         "- Movie times at a cinema: showtimes\n- Booking a"),
    ],
    ids=["plain", "fenced-with-words", "cut-off"],
)  # fmt: skip
def test_the_rewrite_replies_give_the_instruction(reply: str, expected: str) -> None:
    assert extract_proposal(reply) == expected


def test_a_restatement_of_the_rewrite_template_is_refused_and_a_rewrite_is_not() -> None:
    restated = (
        "Rewrite the instruction so that the assistant gives the expected output for each "
        "input, and add what it needed to know."
    )
    rewrite = (
        f"{ROUTER} Requests to add a song to a playlist are playlist; movie times at a "
        "cinema are showtimes; finding a book, film or show is search. Answer with one word."
    )
    assert restates_meta_prompt(restated, REWRITE_REFLECTION_PROMPT, ROUTER)
    assert not restates_meta_prompt(rewrite, REWRITE_REFLECTION_PROMPT, ROUTER)


@pytest.mark.parametrize("name", sorted(REFLECTION_TEMPLATES))
def test_the_knob_selects_the_template(name: str) -> None:
    config = GEPAConfig(reflection_template=name)
    assert config.template_for("instructions") == REFLECTION_TEMPLATES[name]
    assert GEPAConfig(reflection_template="paper").template_for("x") == DEFAULT_REFLECTION_PROMPT


def test_a_template_of_ones_own_and_a_components_override_win_over_the_knob() -> None:
    own = "Improve <curr_instructions> from <inputs_outputs_feedback>"
    rubric = "Fix the rubric <curr_instructions> <inputs_outputs_feedback>"
    config = GEPAConfig(
        reflection_template="paper",
        reflection_prompt_template=own,
        component_prompt_templates={"rubric": rubric},
    )
    assert config.template_for("instructions") == own
    assert config.template_for("rubric") == rubric


@pytest.mark.parametrize("name", ["papers", "", "REWRITE"])
def test_a_bad_template_name_names_the_field(name: str) -> None:
    with pytest.raises(ValueError, match=r"GEPAConfig\.reflection_template must be one of"):
        GEPAConfig(reflection_template=name)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["paper", "rewrite"])
async def test_the_run_reflects_with_the_chosen_template(name: str) -> None:
    reflector = ScriptedReflector(["```\nAnswer. cite\n```"])
    await optimize(
        {"p": "Answer."},
        tasks("train", 3),
        tasks("val", 2),
        KeywordAdapter(),
        reflector,
        GEPAConfig(max_metric_calls=30, max_idle_iterations=2, reflection_template=name),
    )
    expected = build_reflection_prompt(REFLECTION_TEMPLATES[name], "Answer.", [])
    head = expected[: expected.index("Answer.")]
    assert reflector.prompts and reflector.prompts[0].startswith(head)
