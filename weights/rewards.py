"""The judge as GRPO's reward: each reply the model samples while it trains is scored by
the night's judge, as a rollout of the example its prompt came from.

trl calls an async reward function on an event loop of its own, in the training thread;
the judge's model calls belong to the night's loop (its batcher and HTTP clients live
there), so each batch of replies is handed over to that loop and awaited from trl's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from infra.types import Rollout

# rollouts whose output is a new reply -> each one's judge score, None where it failed
ReplyJudge = Callable[[list[Rollout]], Awaitable[list[float | None]]]


def judge_reward(
    judge: ReplyJudge, rollouts: list[Rollout], night_loop: asyncio.AbstractEventLoop
) -> Callable[..., Awaitable[list[float | None]]]:
    """A trl reward function that judges each completion as the reply to its record's
    example (`example_id`, a column of `grpo_records`), in the context of that example's
    first rollout in `rollouts`."""
    context: dict[str, Rollout] = {}
    for rollout in rollouts:
        context.setdefault(rollout.example.id, rollout)

    async def judge_score(
        prompts: list[Any], completions: list[Any], example_id: list[str], **_: Any
    ) -> list[float | None]:
        replies = [
            replace(context[eid], output=_text(completion), score=None, usage={})
            for eid, completion in zip(example_id, completions, strict=True)
        ]
        handed = asyncio.run_coroutine_threadsafe(judge(replies), night_loop)
        return await asyncio.wrap_future(handed)

    return judge_score


def _text(completion: Any) -> str:
    """A completion's text: trl gives chat records' completions as message lists."""
    if isinstance(completion, str):
        return completion
    return "".join(message.get("content") or "" for message in completion)
