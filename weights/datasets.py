"""Judged rollouts become training records: rejection-sampled SFT, preference pairs, and
the prompts GRPO samples from.

Records use trl's conversational formats. SFT records are prompt-completion
(`{"prompt": [...], "completion": [{"role": "assistant", ...}]}`) rather than
`{"messages": [...]}`: SmolLM2's chat template has no `{% generation %}` markers, so
trl's `assistant_only_loss` cannot mask the prompt, while prompt-completion records get
completion-only loss for any template.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict

from infra.lm.tools import for_template, with_tools_described
from infra.types import Rollout

Record = dict[str, list[dict[str, str]]]


class BadRolloutError(ValueError):
    """A rollout that cannot become training data; the message names the example and field."""


def sft_records(
    rollouts: list[Rollout], min_score: float, max_records: int, seed: int = 0
) -> list[Record]:
    """Keep the best-judged distinct outputs at or above `min_score`, balanced across examples.

    Records are dealt in rounds: every example's best output first, then every example's
    second-best distinct output, and so on, so no example dominates the set before each
    has one record. Within a round higher scores come first (ties in a seeded order),
    and the set stops at `max_records`. The result depends only on the rollouts' content
    and `seed`, not on their order.
    """
    by_example: dict[str, list[Rollout]] = defaultdict(list)
    for rollout in rollouts:
        _check(rollout)
        if rollout.score >= min_score and rollout.output.strip():
            by_example[rollout.example.id].append(rollout)

    ranked = {example_id: _distinct_best_first(group) for example_id, group in by_example.items()}
    tie_order = sorted(ranked)
    random.Random(seed).shuffle(tie_order)

    records: list[Record] = []
    for depth in range(max((len(group) for group in ranked.values()), default=0)):
        deal = [ranked[eid][depth] for eid in tie_order if depth < len(ranked[eid])]
        deal.sort(key=lambda rollout: -rollout.score)  # stable: ties keep the seeded order
        for rollout in deal:
            if len(records) == max_records:
                return records
            records.append({"prompt": _chat(rollout), "completion": _reply(rollout.output)})
    return records


def dpo_records(rollouts: list[Rollout], margin: float) -> list[Record]:
    """One preference pair per prompt: its best vs. its worst output, when their scores differ
    by at least `margin`.

    Rollouts pair only when they share the example and the exact prompt messages, since a
    DPO pair must differ in the reply alone.
    """
    if margin <= 0:
        raise ValueError(f"margin must be positive, got {margin}")
    by_prompt: dict[tuple[str, str], list[Rollout]] = defaultdict(list)
    for rollout in rollouts:
        _check(rollout)
        by_prompt[(rollout.example.id, repr(rollout.messages))].append(rollout)

    records: list[Record] = []
    for key in sorted(by_prompt):
        ranked = _distinct_best_first(by_prompt[key])
        best, worst = ranked[0], ranked[-1]
        if best.score - worst.score >= margin:
            records.append(
                {
                    "prompt": _chat(best),
                    "chosen": _reply(best.output),
                    "rejected": _reply(worst.output),
                }
            )
    return records


def grpo_records(rollouts: list[Rollout], max_records: int, seed: int = 0) -> list[dict]:
    """One prompt per distinct (example, chat), in a seeded order, for GRPO to sample its
    own replies to; `example_id` goes with it so the reward can judge a reply against its
    example. Scores are not read: GRPO is judged on what it samples itself."""
    prompts: dict[tuple[str, str], Rollout] = {}
    for rollout in rollouts:
        _check(rollout)
        prompts.setdefault((rollout.example.id, repr(rollout.messages)), rollout)
    order = sorted(prompts)
    random.Random(seed).shuffle(order)
    return [{"prompt": _chat(prompts[key]), "example_id": key[0]} for key in order[:max_records]]


def _distinct_best_first(group: list[Rollout]) -> list[Rollout]:
    """One rollout per distinct output (its best-scored), best first; ties by output text."""
    best: dict[str, Rollout] = {}
    for rollout in sorted(group, key=lambda r: (-r.score, r.output)):
        best.setdefault(rollout.output.strip(), rollout)
    return list(best.values())


def _chat(rollout: Rollout) -> list[dict[str, str]]:
    """The chat the rollout was sent, as training text, as the local engine showed it to a
    model whose chat template reads no tools (SmolLM2's): the tools it was offered are
    described in its system turn, and a replayed tool loop's calls (assistant turns with
    `tool_calls` and no content) are written into the assistant's turn as the model writes
    them (`<tool_call>{...}`), the results as `tool` turns."""
    if not rollout.tools and not any(m.get("tool_calls") for m in rollout.messages):
        return rollout.messages
    chat = for_template(rollout.messages, native=False)
    if rollout.tools:
        chat = with_tools_described(chat, rollout.tools)
    return [{"role": m["role"], "content": m["content"]} for m in chat]


def _reply(output: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": output}]


def _check(rollout: Rollout) -> None:
    example_id = getattr(getattr(rollout, "example", None), "id", "<unknown>")

    def bad(field: str, why: str) -> BadRolloutError:
        return BadRolloutError(f"rollout for example {example_id!r}: field {field!r} {why}")

    if rollout.score is None:
        raise bad("score", "is missing: judge the rollout before training on it")
    if isinstance(rollout.score, bool) or not isinstance(rollout.score, int | float):
        raise bad("score", f"must be a number, got {type(rollout.score).__name__}")
    if math.isnan(rollout.score):
        raise bad("score", "is NaN")
    if not isinstance(rollout.output, str):
        raise bad("output", f"must be a string, got {type(rollout.output).__name__}")
    if not rollout.messages:
        raise bad("messages", "is missing: the chat sent to the model is needed as the prompt")
    for i, message in enumerate(rollout.messages):
        if not (
            isinstance(message, dict)
            and isinstance(message.get("role"), str)
            and (isinstance(message.get("content"), str) or _calls_only(message))
        ):
            raise bad("messages", f"item {i} is not a {{'role': str, 'content': str}} message")
    if rollout.messages[-1]["role"] == "assistant":
        raise bad("messages", "ends with an assistant turn; it must be the prompt only")


def _calls_only(message: dict) -> bool:
    """An assistant turn of a tool loop that only called tools (OpenAI's shape)."""
    return message.get("content") is None and bool(message.get("tool_calls"))
