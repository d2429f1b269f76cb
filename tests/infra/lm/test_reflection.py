"""reflection_lm: a seeded sample per call, so siblings differ and a run replays."""

from __future__ import annotations

from dataclasses import dataclass, field

from infra.lm.protocol import Completion, Usage
from infra.lm.reflection import reflection_lm


@dataclass
class SeedEcho:
    seeds: list[int | None] = field(default_factory=list)

    async def complete(self, messages, *, max_tokens=256, temperature=0.0, seed=None, **_):
        self.seeds.append(seed)
        return Completion(text=f"{messages[0]['content']}#{seed}", usage=Usage(1, 1))


async def test_each_call_gets_the_next_seed():
    lm = SeedEcho()
    reflect = reflection_lm(lm, max_tokens=10, seed=5)
    replies = [await reflect("same prompt") for _ in range(3)]
    assert lm.seeds == [5, 6, 7]
    assert len(set(replies)) == 3  # the same prompt, three different samples
    again = reflection_lm(SeedEcho(), max_tokens=10, seed=5)
    assert [await again("same prompt") for _ in range(3)] == replies
