"""Tokens/s of the local model: the continuous batcher beside a static `model.generate`.

Workloads, each measured side by side in the same run:
- varied (the target's workload): chat requests of varied prompt and output lengths, a
  user message of 1-3 SNIPS utterances (~20-100 tokens) and 32-224 new tokens (mean 128,
  as in the reference), measured two ways:
  - burst: N requests arrive at once; static = one `generate` over those N;
  - sustained: N clients each send their next request as soon as the last one returns
    (a serving benchmark's "N concurrent"), over a queue of 4N requests; static = the
    queue served in consecutive static batches of N.
- long prompts: a system prompt of its own per request (30-400 tokens of labelled SNIPS
  examples, nothing shared) and 8-128 new tokens: bound by prefill, not decode;
- agent: flywheel's shape, every request with the same system prompt and few-shot turns
  (~200 tokens) and its own SNIPS utterance;
- judge: `choice_logprobs` ("Yes"/"No") under one rubric, concurrent beside one at a time;
- reference: a bare user message and exactly 128 new tokens each.
Generations produce exactly their own max_new_tokens (stopping disabled). A static batch
is left-padded and runs to its longest output, counting only the tokens each request
asked for; it runs on the batcher's thread with the model's own attention (the decode
kernel included), so the ratio measures batching alone. The 1-stream level runs 4
requests one after another in both. The prefix cache is emptied before every timed
batcher run, so each run pays for its prefixes.

Then, in the same process: the batch-invariance check and the invariant engine beside
the fast one (`benchmarks/batch_invariance.py`), and the N-request burst beside two other
processes computing on the same cores, with the engine's thread governor on and off.

    python -m benchmarks.local_lm [--levels 1 8 16 32] [--sections throughput invariance contended]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import subprocess
import sys
import time
from functools import partial

import torch

from benchmarks import batch_invariance
from benchmarks.workloads import (
    agent_requests,
    judge_calls,
    long_prompt_requests,
    reference_requests,
    varied_requests,
)
from infra.lm.engine.batcher import Request
from infra.lm.engine.local import LocalLM
from infra.settings import LMSettings

SECTIONS = ("throughput", "invariance", "contended")


async def run_batcher(lm: LocalLM, requests: list[Request], clients: int) -> tuple[int, float]:
    """`clients` callers, each sending the next queued request when its last one returns."""
    lm.batcher.prefixes.clear()
    queue = list(reversed(requests))
    done = []

    async def client() -> None:
        while queue:
            request = queue.pop()
            generation = await lm.batcher.generate(request)
            assert len(generation.token_ids) == request.max_new_tokens
            done.append(len(generation.token_ids))

    start = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    return sum(done), time.perf_counter() - start


def run_static(lm: LocalLM, requests: list[Request], batch: int) -> tuple[int, float]:
    """The requests in consecutive static batches of `batch`."""
    groups = [requests[i : i + batch] for i in range(0, len(requests), batch)]
    pad = lm.tokenizer.pad_token_id
    pad = min(lm.stop_token_ids) if pad is None else pad
    start = time.perf_counter()
    for group in groups:
        width = max(len(r.prompt_ids) for r in group)
        ids = torch.tensor([[pad] * (width - len(r.prompt_ids)) + r.prompt_ids for r in group])
        mask = (
            torch.arange(width)[None]
            >= torch.tensor([width - len(r.prompt_ids) for r in group])[:, None]
        ).long()
        longest = max(r.max_new_tokens for r in group)
        with torch.inference_mode():
            lm.model.generate(
                ids,
                attention_mask=mask,
                max_new_tokens=longest,
                min_new_tokens=longest,  # no early stop: every row runs to the longest
                do_sample=False,
                pad_token_id=pad,
            )
    return sum(r.max_new_tokens for r in requests), time.perf_counter() - start


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def describe(name: str, pool: list[Request]) -> None:
    lengths = sorted(len(r.prompt_ids) for r in pool)
    outs = sorted(r.max_new_tokens for r in pool)
    print(
        f"\n== {name}: prompt tokens {lengths[0]}-{lengths[-1]} (median "
        f"{lengths[len(lengths) // 2]}), new tokens {outs[0]}-{outs[-1]} (sum {sum(outs)})"
    )
    print(
        f"{'requests':>8} {'batcher tok/s':>14} {'static tok/s':>13} {'ratio':>6} "
        f"{'batcher s':>10} {'static s':>9} {'batcher in+out tok/s':>21} {'peak RSS MiB':>13}"
    )


async def compare(lm: LocalLM, pool: list[Request], levels: list[int], rounds: int = 1) -> None:
    """At each level N: `rounds` x N requests (4 at N=1) with N in flight at a time."""
    for n in levels:
        requests = pool[:4] if n == 1 else pool[: n * rounds]
        tokens, b_s = await run_batcher(lm, requests, n)
        # on the batcher's thread: a parallel torch op on another long-lived thread would
        # slow every later decode step of the batcher (see infra/lm/engine/batcher.py)
        useful, s_s = lm.batcher.call_blocking(partial(run_static, lm, requests, n))
        label = "1 (x4)" if n == 1 else (f"{n} (x{rounds})" if rounds > 1 else str(n))
        processed = tokens + sum(len(r.prompt_ids) for r in requests)  # prefill is work too
        print(
            f"{label:>8} {tokens / b_s:>14.0f} {useful / s_s:>13.0f} {s_s / b_s:>6.2f} "
            f"{b_s:>10.1f} {s_s:>9.1f} {processed / b_s:>21.0f} {peak_rss_mib():>13.0f}",
            flush=True,
        )


async def judge(lm: LocalLM, n: int) -> None:
    calls = judge_calls(n)
    prompt = sorted(len(lm.prompt_ids(m)) for m in calls)
    print(f"\n== judge: {n} choice_logprobs calls, prompt tokens {prompt[0]}-{prompt[-1]}")
    lm.batcher.prefixes.clear()
    start = time.perf_counter()
    alone = [await lm.choice_logprobs(m, ["Yes", "No"]) for m in calls]
    one_s = time.perf_counter() - start
    lm.batcher.prefixes.clear()
    start = time.perf_counter()
    together = await asyncio.gather(*(lm.choice_logprobs(m, ["Yes", "No"]) for m in calls))
    all_s = time.perf_counter() - start
    gap = max(
        abs(a - b) for x, y in zip(alone, together, strict=True) for a, b in zip(x, y, strict=True)
    )
    print(
        f"one at a time {one_s:.2f} s ({n / one_s:.0f} calls/s), concurrent {all_s:.2f} s "
        f"({n / all_s:.0f} calls/s), ratio {one_s / all_s:.1f}, max |logprob gap| {gap:.3f}, "
        f"peak RSS {peak_rss_mib():.0f} MiB"
    )


COMPETITOR = """
import torch
x = torch.randn(1024, 1024)
while True:
    x @ x
"""


async def contended(lm: LocalLM, pool: list[Request], n: int) -> None:
    """The N-request burst alone, then beside two other processes that run torch matmuls
    on all cores (as another model process would), with and without the governor."""
    print(f"\n== contended: {n} varied requests at once, beside 2 processes of torch matmuls")
    requests = pool[:n]
    governor = lm.batcher.governor

    def adapt(on: bool) -> None:  # on the batcher's thread: OpenMP thread counts are per thread
        governor.enabled = on
        governor.use_threads(governor.full)
        governor.threads = governor.full

    alone_tokens, alone_s = await run_batcher(lm, requests, n)
    others = [subprocess.Popen([sys.executable, "-c", COMPETITOR]) for _ in range(2)]
    try:
        time.sleep(3)  # until they compute
        rates = {}
        for on in (True, False):
            lm.batcher.call_blocking(partial(adapt, on))
            drops = governor.drops
            tokens, seconds = await run_batcher(lm, requests, n)
            rates[on] = (tokens / seconds, governor.drops - drops)
    finally:
        for process in others:
            process.kill()
        lm.batcher.call_blocking(partial(adapt, True))
    alone = alone_tokens / alone_s
    for on, label in ((True, "threads follow contention"), (False, "all threads, always")):
        rate, drops = rates[on]
        print(
            f"{label:>26}: {rate:.0f} tok/s, {alone / rate:.1f}x slower than alone "
            f"({alone:.0f} tok/s); dropped to one thread {drops} times"
        )
    print("a fair third of 2 cores would cost 3.0x")


async def main(levels: list[int], agent_levels: list[int], sections: list[str]) -> None:
    lm = LocalLM(LMSettings())
    print(f"model {lm.base_model_path}  dtype {lm.model.dtype}  threads {torch.get_num_threads()}")
    print(lm.describe())
    # Other processes on the same cores slow both engines: the load average tells.
    print(f"load average before: {os.getloadavg()[0]:.1f}")
    pool = varied_requests(lm, 4 * max(levels + [4]))
    await run_batcher(lm, pool[:4], 4)  # warm up both paths
    lm.batcher.call_blocking(lambda: run_static(lm, pool[:2], 2))
    if "throughput" in sections:
        describe("varied, burst (N at once)", pool[: max(levels)])
        await compare(lm, pool, levels)
        describe("varied, sustained (N in flight over a queue of 4N)", pool)
        await compare(lm, pool, [n for n in levels if n > 1], rounds=4)
        long = long_prompt_requests(lm, max(levels + [4]))
        describe("long prompts (a system prompt of its own, nothing shared)", long)
        await compare(lm, long, levels)
        agents = agent_requests(lm, max(agent_levels))
        describe("agent (shared system prompt + few-shot turns)", agents)
        await compare(lm, agents, agent_levels)
        await judge(lm, 32)
        reference = reference_requests(lm, max(levels + [4]))
        describe("reference (bare user message, equal outputs)", reference)
        await compare(lm, reference, levels)
    if "invariance" in sections:
        print("\n== batch invariance (benchmarks/batch_invariance.py)")
        print(await batch_invariance.check(lm, max(levels)))
    if "contended" in sections:
        await contended(lm, pool, max(levels))
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    lm.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 8, 16, 32])
    parser.add_argument("--agent-levels", type=int, nargs="+", default=[8, 16, 32])
    parser.add_argument(
        "--sections",
        nargs="+",
        choices=SECTIONS,
        default=list(SECTIONS),
        help="throughput: batcher vs static generate; invariance: alone vs batched, "
        "invariant vs fast engine; contended: beside two other processes",
    )
    args = parser.parse_args()
    asyncio.run(main(args.levels, args.agent_levels, args.sections))
