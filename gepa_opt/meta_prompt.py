"""The reflection meta-prompts (the GEPA paper's, §3.2, and a plain rewrite task for small
reflection models), and how records are rendered into them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

CURRENT_INSTRUCTIONS = "<curr_instructions>"
EXAMPLES = "<inputs_outputs_feedback>"

DEFAULT_REFLECTION_PROMPT = f"""I provided an assistant with the following instructions to perform a task for me:
```
{CURRENT_INSTRUCTIONS}
```

The following are examples of different task inputs provided to the assistant along with the assistant's response for each of them, and some feedback on how the assistant's response could be better:
```
{EXAMPLES}
```

Your task is to write a new instruction for the assistant.

Read the inputs carefully and identify the input format and infer detailed task description about the task I wish to solve with the assistant.

Read all the assistant responses and the corresponding feedback. Identify all niche and domain specific factual information about the task and include it in the instruction, as a lot of it may not be available to the assistant in the future. The assistant may have utilized a generalizable strategy to solve the task, if so, include that in the instruction as well.

Provide the new instructions within ``` blocks."""  # noqa: E501

# A plain task for small reflection models. Given the paper's template, the 1.5B teacher
# mostly copied the first fenced block it had read (the current instruction) or wrote
# none; asked plainly, it rewrites. It speaks of "inputs", "outputs" and "feedback" (the
# records' own headings), so it serves an agent's prompt and a judge's rubric alike.
REWRITE_REFLECTION_PROMPT = f"""Rewrite this instruction so that an assistant following it would have given the expected output for each input below.

Instruction:
{CURRENT_INSTRUCTIONS}

Inputs, the outputs the assistant gave, and feedback on each (whether it was right, and if not, what was expected):

{EXAMPLES}

Reply with the rewritten instruction only. Keep its task and the form of its output, and add what the assistant needed to know to tell such inputs apart: in general, not about these inputs one by one."""  # noqa: E501

ReflectionTemplate = Literal["paper", "rewrite"]
REFLECTION_TEMPLATES: dict[str, str] = {
    "paper": DEFAULT_REFLECTION_PROMPT,
    "rewrite": REWRITE_REFLECTION_PROMPT,
}


def check_template(template: str, where: str) -> None:
    """A template missing a placeholder would silently drop the evidence reflection needs."""
    missing = [p for p in (CURRENT_INSTRUCTIONS, EXAMPLES) if p not in template]
    if missing:
        raise ValueError(f"{where} lacks the placeholder(s) {', '.join(missing)}")


def build_reflection_prompt(
    template: str, current_text: str, records: Sequence[Mapping[str, Any]]
) -> str:
    """Plain replacement, not str.format: prompts and records are full of braces."""
    return template.replace(CURRENT_INSTRUCTIONS, current_text).replace(
        EXAMPLES, render_records(records)
    )


def render_records(records: Sequence[Mapping[str, Any]]) -> str:
    """Markdown headings per example and field, so nested inputs stay readable to the LM."""
    return "\n\n".join(
        f"# Example {n}\n" + "".join(_render(key, value, 2) for key, value in record.items())
        for n, record in enumerate(records, start=1)
    )


def _render(title: str, value: Any, level: int) -> str:
    heading = f"{'#' * min(level, 6)} {title}\n"
    if isinstance(value, Mapping):
        return heading + "".join(_render(str(k), v, level + 1) for k, v in value.items())
    if isinstance(value, list | tuple):
        return heading + "".join(
            _render(f"Item {n}", item, level + 1) for n, item in enumerate(value, start=1)
        )
    return heading + f"{str(value).strip()}\n\n"
