"""Whether the local engine gives a request the same answer whatever it is batched with.

- Generation: N SNIPS chat requests (1-3 utterances, 16-96 new tokens, greedy, with
  log-probabilities) run one at a time, then all N at once. A request counts as identical
  when its tokens and every log-probability are the same bits.
- Judge calls: N `choice_logprobs` calls ("Yes"/"No") under one rubric, the same way.
- Judge calibration: the demo night's seed rubric is fitted twice on the night's own
  labels (threshold on train, kappa on val, then kappa on held-out), once with every call
  in flight together and once 3 at a time in reverse order: other batches, same texts.
- Speed: the N requests at once on the invariant engine and on the fast one
  (`lm.batch_invariant = false`: no padding of products, one-matmul attention, nothing
  checked), alternating, in the same process.
Every check also runs on the fast engine, to show what it catches. Ends with one line:

    batch invariance: K/N identical (tokens and log-probabilities); invariant/fast speed R

    python -m benchmarks.batch_invariance [--requests 32]
"""

from __future__ import annotations

import argparse
import asyncio
import time

from benchmarks.workloads import judge_calls, varied_requests
from infra.lm.engine.batcher import Request
from infra.lm.engine.invariance import EnginePlan, unchecked_plan
from infra.lm.engine.local import LocalLM
from infra.settings import LMSettings


def requests(lm: LocalLM, n: int) -> list[Request]:
    """Greedy, stopping at the end of the turn, with log-probabilities."""
    stops = lm.stop_token_ids
    return varied_requests(lm, n, 5, (16, 96), stop_token_ids=stops, want_logprobs=True)


async def generations_identical(lm: LocalLM, pool: list[Request]) -> int:
    alone = [await lm.batcher.generate(r) for r in pool]
    together = await asyncio.gather(*(lm.batcher.generate(r) for r in pool))
    return sum(
        (a.token_ids, a.logprobs) == (b.token_ids, b.logprobs)
        for a, b in zip(alone, together, strict=True)
    )


async def scores_identical(lm: LocalLM, n: int) -> int:
    calls = judge_calls(n)
    alone = [await lm.choice_logprobs(c, ["Yes", "No"]) for c in calls]
    together = await asyncio.gather(*(lm.choice_logprobs(c, ["Yes", "No"]) for c in calls))
    return sum(a == b for a, b in zip(alone, together, strict=True))


class Throttled:
    """The LM with at most `limit` judge calls in flight: other batch compositions."""

    def __init__(self, lm: LocalLM, limit: int):
        self.lm, self.gate = lm, asyncio.Semaphore(limit)

    async def choice_logprobs(self, messages, choices, adapter=None):
        async with self.gate:
            return await self.lm.choice_logprobs(messages, choices, adapter)


async def judge_twice(lm: LocalLM) -> list[tuple[float, float, float]]:
    """(threshold, val kappa, held-out kappa) of the seed rubric, in two compositions."""
    from flows.night.collect import collect
    from flows.night.runtime import Runtime
    from flows.night.stages import judge_items_split
    from infra.settings import Settings
    from judges.pass_fail_fit import fit_and_validate, heldout_agreement
    from judges.pointwise import SEED_JUDGE_PROMPTS

    rt = Runtime(Settings(), lm=lm)
    batch = rt.traces.fetch(since=None, limit=rt.settings.traces.max_traces)
    items = collect(batch, rt.agent, rt.settings.traces.annotation_name).items
    train, val, heldout = judge_items_split(rt, items)
    fits = []
    for judge_lm, order in ((lm, 1), (Throttled(lm, 3), -1)):
        threshold, kappa = await fit_and_validate(
            judge_lm, SEED_JUDGE_PROMPTS, train[::order], val[::order]
        )
        report, _ = await heldout_agreement(
            judge_lm, SEED_JUDGE_PROMPTS, threshold, heldout[::order], 0
        )
        fits.append((threshold, kappa, report["kappa"]))
    return fits


async def tokens_per_s(lm: LocalLM, pool: list[Request]) -> float:
    lm.batcher.prefixes.clear()
    start = time.perf_counter()
    done = await asyncio.gather(*(lm.batcher.generate(r) for r in pool))
    return sum(len(g.token_ids) for g in done) / (time.perf_counter() - start)


async def speed_ratio(lm: LocalLM, pool: list[Request], plans: dict[str, EnginePlan]) -> dict:
    """Tokens/s of each plan on `pool` at once, alternating, best of 2 rounds."""
    speeds: dict[str, list[float]] = {name: [] for name in plans}
    for _ in range(2):
        for name, plan in plans.items():
            lm.batcher.use_plan(plan)
            speeds[name].append(await tokens_per_s(lm, pool))
    return {name: max(v) for name, v in speeds.items()}


async def check(lm: LocalLM, n: int) -> str:
    """Run every check on both plans; print them; return the one-line summary."""
    invariant = lm.batcher.plan
    plans = {"invariant": invariant, "fast": unchecked_plan()}
    pool = requests(lm, n)
    print(lm.describe())
    results = {}
    for name, plan in plans.items():
        lm.batcher.use_plan(plan)
        same = await generations_identical(lm, pool)
        scores = await scores_identical(lm, n)
        fits = await judge_twice(lm)
        results[name] = same
        print(
            f"{name:>9}: generations {same}/{n} identical, judge calls {scores}/{n}; seed "
            f"rubric fitted twice: threshold {fits[0][0]:.6f} vs {fits[1][0]:.6f}, val kappa "
            f"{fits[0][1]:.4f} vs {fits[1][1]:.4f}, held-out kappa {fits[0][2]:.4f} vs "
            f"{fits[1][2]:.4f}",
            flush=True,
        )
    await tokens_per_s(lm, pool[:4])  # warm both plans' kernels
    speeds = await speed_ratio(lm, pool, plans)
    lm.batcher.use_plan(invariant)
    print(
        f"{n} requests at once: invariant {speeds['invariant']:.0f} tok/s, fast "
        f"{speeds['fast']:.0f} tok/s"
    )
    return (
        f"batch invariance: {results['invariant']}/{n} identical (tokens and log-probabilities); "
        f"invariant/fast speed {speeds['invariant'] / speeds['fast']:.2f}"
    )


async def main(n: int) -> None:
    lm = LocalLM(LMSettings())
    try:
        print(await check(lm, n))
    finally:
        lm.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=32)
    asyncio.run(main(parser.parse_args().requests))
