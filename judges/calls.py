"""A judge's model calls that fail for good (`ModelCallFailed`): left out, counted, and
never turned into a verdict (a failed call is not a "fail", nor P(pass) = 0.5)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, TypeVar

from gepa_opt import CallFailed
from infra.lm import ModelCallFailed

NO_REASON = "(The judge's reason is missing: its call failed.)"
"""What feedback says in place of a rationale whose call failed for good."""

X = TypeVar("X")
T = TypeVar("T")
# told how many more items are done (answered or failed for good): a progress display's
Done = Callable[[int], None]


class Tally(Protocol):
    """A progress display as a judging step that finds its work as it goes sees it
    (`flows.report.progress.StageProgress` is one): `expect(n)` more items to judge,
    `advance(n)` judged."""

    def expect(self, n: int) -> None: ...

    def advance(self, n: int = 1) -> None: ...


async def each(
    items: Sequence[X], call: Callable[[X], Awaitable[T]], done: Done | None = None
) -> list[T | None]:
    """`call(item)` for every item at once; None where the model call failed for good.
    `done(1)` as each item's call ends, either way."""

    async def one(item: X) -> T | None:
        try:
            return await call(item)
        except ModelCallFailed:
            return None
        finally:
            if done is not None:
                done(1)

    return list(await asyncio.gather(*(one(item) for item in items)))


async def counted(
    items: Sequence[X],
    many: Callable[[list[X]], Awaitable[list[T]]],
    done: Done | None = None,
) -> list[T]:
    """`many(items)`, a call that answers a list item by item (`p_pass_many`, `judged`),
    with `done(1)` as each item's answer lands: one call per item, all in flight at once,
    as `many` itself runs them (`each`), so the model batches them just the same."""
    if done is None:
        return await many(list(items))

    async def one(item: X) -> T:
        (answer,) = await many([item])
        done(1)
        return answer

    return list(await asyncio.gather(*(one(item) for item in items)))


async def tallied(
    items: Sequence[X], many: Callable[[list[X]], Awaitable[list[T]]], tally: Tally | None
) -> list[T]:
    """`counted`, with the items first announced to `tally` as work to do."""
    if tally is None:
        return await many(list(items))
    tally.expect(len(items))
    return await counted(items, many, tally.advance)


def answered(items: Sequence[X], results: Sequence[T | None]) -> tuple[list[X], list[T]]:
    """The items whose call succeeded, and their results, in order."""
    pairs = [(item, r) for item, r in zip(items, results, strict=True) if r is not None]
    return [item for item, _ in pairs], [r for _, r in pairs]


async def for_gepa(work: Awaitable[T]) -> T:
    """`work` as a GEPA adapter's call: a model call that failed for good is GEPA's
    `CallFailed` (tried again, never scored, never charged)."""
    try:
        return await work
    except ModelCallFailed as error:
        raise CallFailed(str(error)) from error


def gepa_reflection(reflect: Callable[[str], Awaitable[str]]) -> Callable[[str], Awaitable[str]]:
    """A reflection model for GEPA whose failed calls are `CallFailed`."""

    async def reflection(prompt: str) -> str:
        return await for_gepa(reflect(prompt))

    return reflection
