"""Tools through the local engine: the tools reach the 135M model through its chat
template (which does not read `tools`, so they are described in the system turn), their
tokens count as the prompt's, and the call the model writes comes back as a ToolCall."""

from __future__ import annotations

import json

import pytest

from infra.lm.engine.local import LocalLM
from infra.settings import LMSettings
from tests.tool_chats import FIND, SHOWN_THEN_ASKED

CHAT = SHOWN_THEN_ASKED


@pytest.fixture(scope="module")
def lm():
    local = LocalLM(LMSettings())
    yield local
    local.close()


async def test_the_model_calls_the_tool_it_was_shown_and_the_call_comes_back(lm):
    done = await lm.complete(CHAT, tools=[FIND], max_tokens=40)
    assert [c.name for c in done.tool_calls] == ["find_slot"]
    assert "Tuesday" in json.dumps(done.tool_calls[0].arguments)
    assert done.finish_reason == "tool_calls" and "<tool_call>" not in done.text


async def test_the_tools_are_part_of_the_prompt_and_counted(lm):
    with_tools = lm.prompt_ids(CHAT, [FIND])
    text = lm.tokenizer.decode(with_tools)
    assert "Find a free calendar slot on a day" in text and '"required": ["day"]' in text
    # earlier calls are written as the model is asked to write them
    assert '<tool_call>{"name": "find_slot", "arguments": {"day": "Monday"}}</tool_call>' in text
    before = sum(lm.tally.prompt_tokens.values())
    done = await lm.complete(CHAT, tools=[FIND], max_tokens=4)
    assert done.usage.prompt_tokens == len(with_tools) > len(lm.prompt_ids(CHAT))
    assert sum(lm.tally.prompt_tokens.values()) - before == len(with_tools)


async def test_without_tools_a_written_call_is_only_text(lm):
    done = await lm.complete(CHAT, max_tokens=40)
    assert done.tool_calls == [] and done.finish_reason != "tool_calls"


async def test_a_template_that_reads_tools_gets_them_as_they_are(lm, monkeypatch):
    template = (
        "{% if tools %}TOOLS {{ tools | tojson }}\n{% endif %}"
        "{% for m in messages %}{{ m.role }}: {{ m.content }}"
        "{% for c in m.tool_calls or [] %} CALL {{ c.function.name }}"
        " {{ c.function.arguments | tojson }}{% endfor %}\n{% endfor %}"
    )
    monkeypatch.setattr(lm.tokenizer, "chat_template", template)
    monkeypatch.setattr(lm, "native_tools", True)
    text = lm.tokenizer.decode(lm.prompt_ids(CHAT[:3], [FIND]))
    assert text.startswith('TOOLS [{"type": "function"')  # not described in a system turn
    assert 'CALL find_slot {"day": "Monday"}' in text  # arguments as a dict, not a string


async def test_a_broken_tool_definition_is_refused_before_any_call(lm):
    calls = sum(lm.tally.calls.values())
    with pytest.raises(ValueError, match=r"tools\[0\]: needs function.name"):
        await lm.complete(CHAT, tools=[{"type": "function", "function": {}}])
    assert sum(lm.tally.calls.values()) == calls


def test_a_training_prompt_shows_the_tools_as_the_engine_showed_them(lm):
    """The weight step trains on the chat a tool loop was sent: with the tools it was
    offered described, token for token what the engine rendered for the model."""
    from infra.types import Example, Rollout
    from weights.datasets import sft_records

    call = {"id": "c0", "type": "function", "function": {"name": "find_slot"}}
    call["function"]["arguments"] = '{"day": "Friday"}'
    sent = [
        *CHAT[:-1],
        {"role": "user", "content": "Anything on Friday?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c0", "content": "Free on Friday: 10:00."},
    ]
    rollout = Rollout(Example("t", {"request": "Friday"}), {}, "Booked.", sent, 1.0, tools=[FIND])
    (record,) = sft_records([rollout], min_score=0.5, max_records=1)
    trained = lm.tokenizer.apply_chat_template(
        record["prompt"], add_generation_prompt=True, tokenize=True, return_dict=False
    )
    assert trained == lm.prompt_ids(sent, [FIND])
    assert trained != lm.prompt_ids(sent)  # without the tools, the model saw another prompt
