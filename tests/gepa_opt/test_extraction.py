"""Getting the proposed text out of what reflection LMs actually reply, and the meta-prompt."""

import pytest

from gepa_opt.config import GEPAConfig
from gepa_opt.extraction import extract_proposal
from gepa_opt.meta_prompt import DEFAULT_REFLECTION_PROMPT, build_reflection_prompt


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("```\nNew instruction.\n```", "New instruction."),
        ("Sure!\n```markdown\nLine 1\nLine 2\n```\nHope this helps.", "Line 1\nLine 2"),
        ("  Just the instruction, no fence.  \n", "Just the instruction, no fence."),
        ("Here it is:\n```\nDo X\nand Y", "Do X\nand Y"),
        ("```text\nDo X", "Do X"),
        ("Do X\n```", "Do X"),
        ("```Be brief.```", "Be brief."),
        (
            "```\nAnswer as:\n```json\n{}\n```\nNothing else.\n```",
            "Answer as:\n```json\n{}\n```\nNothing else.",
        ),
    ],
    ids=["fenced", "language-tag", "no-fence", "unclosed", "unclosed-tag", "closing-only",
         "one-line", "nested-fence"],
)  # fmt: skip
def test_extracts_the_fenced_text(reply: str, expected: str) -> None:
    assert extract_proposal(reply) == expected


@pytest.mark.parametrize(
    "reply", ["", None, "   \n", "```\n```", "``` ```", "```", "```python\n```"]
)
def test_empty_replies_give_no_proposal(reply: str | None) -> None:
    assert extract_proposal(reply) == ""


def test_meta_prompt_is_the_papers_with_instructions_and_records_filled_in() -> None:
    records = [
        {
            "Inputs": {"question": "2+2?", "context": ["a", "b"]},
            "Generated Outputs": "5",
            "Feedback": "Wrong: {expected 4}",
        }
    ]
    prompt = build_reflection_prompt(DEFAULT_REFLECTION_PROMPT, "Add numbers.", records)
    assert prompt.startswith(
        "I provided an assistant with the following instructions to perform a task for me:\n"
        "```\nAdd numbers.\n```"
    )
    assert "# Example 1\n## Inputs\n### question\n2+2?" in prompt
    assert "### context\n#### Item 1\na\n\n#### Item 2\nb" in prompt
    assert "## Feedback\nWrong: {expected 4}" in prompt
    assert prompt.endswith("Provide the new instructions within ``` blocks.")
    assert "<curr_instructions>" not in prompt and "<inputs_outputs_feedback>" not in prompt


def test_templates_must_keep_both_placeholders() -> None:
    with pytest.raises(ValueError, match="inputs_outputs_feedback"):
        GEPAConfig(reflection_prompt_template="Improve: <curr_instructions>")
    with pytest.raises(ValueError, match=r"component_prompt_templates\['rubric'\]"):
        GEPAConfig(component_prompt_templates={"rubric": "no placeholders"})
