import pytest

from infra.types import Example, Rollout
from weights.datasets import BadRolloutError, dpo_records, grpo_records, sft_records


def rollout(example_id: str, output: str, score: float | None, prompt: str = "p") -> Rollout:
    return Rollout(
        example=Example(id=example_id, inputs={"text": example_id}),
        prompts={"system": prompt},
        output=output,
        messages=[{"role": "system", "content": prompt}, {"role": "user", "content": example_id}],
        score=score,
    )


def outputs(records: list[dict]) -> list[str]:
    return [r["completion"][0]["content"] for r in records]


def test_sft_keeps_best_passing_rollout_as_prompt_completion():
    records = sft_records(
        [rollout("a", "weak", 0.6), rollout("a", "strong", 0.9), rollout("a", "bad", 0.1)],
        min_score=0.5,
        max_records=1,
    )
    assert records == [
        {
            "prompt": [{"role": "system", "content": "p"}, {"role": "user", "content": "a"}],
            "completion": [{"role": "assistant", "content": "strong"}],
        }
    ]


def test_sft_drops_below_threshold_and_empty_outputs():
    rollouts = [rollout("a", "x", 0.4), rollout("b", "  ", 1.0), rollout("c", "y", 0.5)]
    assert outputs(sft_records(rollouts, min_score=0.5, max_records=10)) == ["y"]


def test_sft_dedupes_identical_outputs_within_an_example():
    rollouts = [rollout("a", "same", 1.0), rollout("a", "same ", 0.8), rollout("a", "other", 0.7)]
    assert outputs(sft_records(rollouts, min_score=0.5, max_records=10)) == ["same", "other"]


def test_sft_keeps_identical_outputs_of_different_examples():
    rollouts = [rollout("a", "billing", 1.0), rollout("b", "billing", 1.0)]
    assert len(sft_records(rollouts, min_score=0.5, max_records=10)) == 2


def test_sft_balances_examples_before_taking_seconds():
    rollouts = [rollout("a", f"a{i}", 1.0 - i / 10) for i in range(5)] + [rollout("b", "b0", 0.6)]
    records = sft_records(rollouts, min_score=0.5, max_records=3)
    assert outputs(records) == ["a0", "b0", "a1"]


def test_sft_is_deterministic_and_order_independent():
    rollouts = [rollout(str(i), f"out{i}", 1.0) for i in range(20)]
    first = sft_records(rollouts, min_score=0.5, max_records=5, seed=3)
    assert sft_records(list(reversed(rollouts)), min_score=0.5, max_records=5, seed=3) == first
    assert sft_records(rollouts, min_score=0.5, max_records=5, seed=4) != first


def test_dpo_pairs_best_and_worst_when_margin_is_met():
    rollouts = [rollout("a", "good", 1.0), rollout("a", "mid", 0.5), rollout("a", "bad", 0.0)]
    assert dpo_records(rollouts, margin=0.5) == [
        {
            "prompt": rollouts[0].messages,
            "chosen": [{"role": "assistant", "content": "good"}],
            "rejected": [{"role": "assistant", "content": "bad"}],
        }
    ]


def test_dpo_skips_small_margins_single_rollouts_and_different_prompts():
    rollouts = [
        rollout("a", "x", 0.6),
        rollout("a", "y", 0.5),
        rollout("b", "only", 1.0),
        rollout("c", "good", 1.0, prompt="p1"),
        rollout("c", "bad", 0.0, prompt="p2"),
    ]
    assert dpo_records(rollouts, margin=0.5) == []


def test_dpo_needs_a_positive_margin():
    with pytest.raises(ValueError, match="margin"):
        dpo_records([], margin=0)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"score": None}, "score"),
        ({"score": float("nan")}, "score"),
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "user"}]}, "messages"),
        ({"messages": [{"role": "assistant", "content": "hi"}]}, "messages"),
    ],
)
@pytest.mark.parametrize("build", [sft_records, dpo_records])
def test_bad_rollouts_name_the_example_and_field(change, field, build):
    bad = rollout("ex-42", "out", 1.0)
    for key, value in change.items():
        setattr(bad, key, value)
    args = (0.5, 10) if build is sft_records else (0.5,)
    with pytest.raises(BadRolloutError, match=rf"'ex-42'.*'{field}'"):
        build([rollout("ok", "out", 1.0), bad], *args)


def test_grpo_takes_each_distinct_prompt_once_in_a_seeded_order():
    rollouts = [
        rollout("a", "x", 0.9),
        rollout("a", "y", 0.1),  # the same chat: one prompt
        rollout("a", "x", 0.5, prompt="q"),  # FST drew other prompts: another
        rollout("b", "z", 0.2),
        rollout("c", "", 0.0),  # an empty reply still gives its prompt
    ]
    records = grpo_records(rollouts, max_records=10, seed=1)
    assert sorted((r["example_id"], r["prompt"][0]["content"]) for r in records) == [
        ("a", "p"), ("a", "q"), ("b", "p"), ("c", "p"),
    ]  # fmt: skip
    assert records == grpo_records(list(reversed(rollouts)), max_records=10, seed=1)
    assert len(grpo_records(rollouts, max_records=2, seed=1)) == 2
    with pytest.raises(BadRolloutError, match="example 'b': field 'score'"):
        grpo_records([rollout("b", "z", None)], max_records=2)


def tool_loop_rollout(example_id: str, output: str, score: float) -> Rollout:
    """A replayed tool loop's last call: the chat holds the call (no content) and its result."""
    call = {"id": "call_0", "type": "function", "function": {"name": "find_slot"}}
    call["function"]["arguments"] = '{"day": "Friday"}'
    sent = [
        {"role": "system", "content": "Book meetings."},
        {"role": "user", "content": "Anything on Friday."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_0", "content": "Free on Friday: 10:00."},
    ]
    return Rollout(
        example=Example(id=example_id, inputs={"request": "Anything on Friday."}),
        prompts={"system": "Book meetings."},
        output=output,
        messages=sent,
        score=score,
    )


def test_a_tool_loop_s_chat_trains_with_its_calls_written_as_the_model_writes_them():
    written = '<tool_call>{"name": "find_slot", "arguments": {"day": "Friday"}}</tool_call>'
    expected = [
        {"role": "system", "content": "Book meetings."},
        {"role": "user", "content": "Anything on Friday."},
        {"role": "assistant", "content": written},
        {"role": "tool", "content": "Free on Friday: 10:00."},
    ]
    good, bad = tool_loop_rollout("t", "Booked 10:00.", 0.9), tool_loop_rollout("t", "No.", 0.1)
    (sft,) = sft_records([good], min_score=0.5, max_records=5)
    assert sft == {
        "prompt": expected,
        "completion": [{"role": "assistant", "content": "Booked 10:00."}],
    }
    (pair,) = dpo_records([good, bad], margin=0.5)
    assert pair["prompt"] == expected and pair["rejected"][0]["content"] == "No."
    assert grpo_records([good], max_records=1)[0]["prompt"] == expected
    # an assistant turn with neither content nor calls is still refused
    good.messages[2] = {"role": "assistant", "content": None}
    with pytest.raises(BadRolloutError, match="item 2"):
        sft_records([good], min_score=0.5, max_records=5)
