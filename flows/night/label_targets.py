"""What the night learns from people's labels directly: per labelled trace, the reply it
should have given. A person's correction where they wrote one, the logged reply where
they passed it, else one the teacher writes from their comment, kept only where the
night's judge passes it (`weights.corrections`). The weight step trains on these first
(`weights.round.training_sets`).

Only the night's readable traces outside the held-out slice are read (`Collected` holds
no other), so no held-out trace's label becomes a target.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime

from flows.night.collect import Collected
from flows.night.runtime import Runtime
from judges.judge import Judge
from judges.trajectory import recorded_request
from judges.types import JudgedItem
from weights.corrections import Commented, WrittenCorrections, write_corrections


def commented(collected: Collected) -> list[Commented]:
    """The failing replies a reviewer commented on and nobody corrected, of the night's
    traces, in trace order."""
    examples = {ex.id: ex for ex in collected.examples}
    return [
        Commented(item.id, collected.chats[item.id], collected.outputs[item.id], comment)
        for item in sorted(collected.items, key=lambda i: i.id)
        if item.human_pass is False
        and (comment := item.human_comment.strip())
        and item.id in examples
        and item.id in collected.chats
        and item.id not in collected.corrections
    ]


def newest_labelled(
    asked: list[Commented], labelled_at: Mapping[str, datetime], limit: int | None
) -> list[Commented]:
    """The `limit` of `asked` whose labels were made last (all of them with None), in
    their order: each costs the teacher a reply and the judge a read, so a night with
    many comments and no corrections bounds its time, and the freshest say most of
    the agent as it is now."""
    if limit is None or len(asked) <= limit:
        return asked
    oldest = datetime.min.replace(tzinfo=UTC)
    newest = sorted(asked, key=lambda c: labelled_at.get(c.example_id, oldest), reverse=True)
    chosen = {c.example_id for c in newest[:limit]}
    return [c for c in asked if c.example_id in chosen]


async def teacher_corrections(
    rt: Runtime,
    collected: Collected,
    judge: Judge,
    max_tokens: int,
    asked: list[Commented] | None = None,
    done: Callable[[int], None] | None = None,
) -> WrittenCorrections:
    """The teacher's (`[reflection]`'s model) correction of each commented failing reply
    (`asked`: `commented(collected)` when None), kept where `judge` passes it as the reply
    to its request; `done(1)` as each is written and judged."""
    metric = judge.metric(rt.judge_lm, rt.settings.judge.rationale_max_tokens)
    requests = {ex.id: recorded_request(ex) for ex in collected.examples}

    async def passes(example_id: str, reply: str) -> bool | None:
        (p,) = await metric.p_pass_many([JudgedItem(example_id, requests[example_id], reply)])
        return None if p is None else metric.passes(p)

    asked = commented(collected) if asked is None else asked
    return await write_corrections(rt.reflection_lm, asked, passes, max_tokens, done)
