"""Tokens/s of the local model: the continuous batcher beside a static `model.generate`.

Three workloads, each measured side by side in the same run:
- varied: an intent-routing system prompt of its own per request (30-400 tokens: a varied
  number of labelled SNIPS examples) and a SNIPS utterance;
- agent: flywheel's shape, every request with the same system prompt and few-shot turns
  (~200 tokens) and its own SNIPS utterance;
- judge: `choice_logprobs` ("Yes"/"No") under one rubric, concurrent beside one at a time.
Generations produce exactly their own max_new_tokens (8-128; stopping disabled). At each
concurrency level N the same N requests go (a) all at once through the batcher and (b)
through one `model.generate` over a static left-padded batch run to the longest output,
counting only the tokens each request asked for. The 1-stream level runs 4 requests one
after another in both. The prefix cache is emptied before every timed batcher run, so
each run pays for its shared prefix once.

    python benchmarks/local_lm.py [--levels 1 8 16 32]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import time
from pathlib import Path

import torch

from infra.lm.batcher import Request
from infra.lm.local import LocalLM
from infra.settings import LMSettings

SNIPS = (
    Path(__file__).resolve().parents[1].parent / "shared/data/snips/2017-06-custom-intent-engines"
)


def utterances() -> list[tuple[str, str]]:
    """(intent, text) pairs from the SNIPS validation files."""
    pairs = []
    for path in sorted(SNIPS.glob("*/validate_*.json")):
        for intent, rows in json.loads(path.read_text(encoding="latin-1")).items():
            pairs += [(intent, "".join(part["text"] for part in row["data"])) for row in rows]
    return pairs


def make_requests(lm: LocalLM, n: int, seed: int = 0) -> list[Request]:
    rng = random.Random(seed)
    pairs = utterances()
    head = "Name the intent of the user's message, as in these examples:\n"
    requests = []
    for _ in range(n):
        target = rng.randint(30, 400)
        system = head
        while True:  # grow the few-shot block until the prompt reaches its target length
            intent, text = rng.choice(pairs)
            longer = system + f"{text} -> {intent}\n"
            messages = [{"role": "system", "content": longer}, {"role": "user", "content": ""}]
            if len(lm.prompt_ids(messages)) > target - 12:
                break
            system = longer
        _, question = rng.choice(pairs)
        messages = [{"role": "system", "content": system}, {"role": "user", "content": question}]
        prompt = lm.prompt_ids(messages)
        requests.append(Request(prompt, rng.randint(8, 128)))  # no stop: exact lengths
    return requests


def reference_requests(lm: LocalLM, n: int, seed: int = 3) -> list[Request]:
    """The issue's reference shape: a bare user message, 128 new tokens each."""
    rng = random.Random(seed)
    pairs = utterances()
    return [
        Request(lm.prompt_ids([{"role": "user", "content": rng.choice(pairs)[1]}]), 128)
        for _ in range(n)
    ]


def agent_requests(lm: LocalLM, n: int, seed: int = 1) -> list[Request]:
    """One system prompt and few-shot turns shared by all; a user message of its own each."""
    rng = random.Random(seed)
    pairs = utterances()
    shots = rng.sample(pairs, 8)
    head = [
        {"role": "system", "content": "Name the intent of the user's message in one word."},
        *(
            m
            for i, t in shots
            for m in ({"role": "user", "content": t}, {"role": "assistant", "content": i})
        ),
    ]
    requests = []
    for _ in range(n):
        _, question = rng.choice(pairs)
        prompt = lm.prompt_ids([*head, {"role": "user", "content": question}])
        requests.append(Request(prompt, rng.randint(8, 128)))
    return requests


def judge_calls(n: int, seed: int = 2) -> list[list[dict[str, str]]]:
    rng = random.Random(seed)
    pairs = utterances()
    intents = sorted({i for i, _ in pairs})
    rubric = (
        "You grade an intent classifier. The user message and the predicted intent follow. "
        "Answer Yes if the predicted intent is the one the user means, otherwise No. "
        f"The possible intents are: {', '.join(intents)}. Answer with one word."
    )
    calls = []
    for _ in range(n):
        intent, text = rng.choice(pairs)
        guess = intent if rng.random() < 0.5 else rng.choice(intents)
        user = f"Message: {text}\nPredicted intent: {guess}"
        calls.append([{"role": "system", "content": rubric}, {"role": "user", "content": user}])
    return calls


async def run_batcher(lm: LocalLM, requests: list[Request], sequential: bool) -> tuple[int, float]:
    lm.batcher.prefixes.clear()
    start = time.perf_counter()
    if sequential:
        done = [await lm.batcher.generate(r) for r in requests]
    else:
        done = await asyncio.gather(*(lm.batcher.generate(r) for r in requests))
    seconds = time.perf_counter() - start
    assert [len(d.token_ids) for d in done] == [r.max_new_tokens for r in requests]
    return sum(len(d.token_ids) for d in done), seconds


def run_static(lm: LocalLM, requests: list[Request], sequential: bool) -> tuple[int, float]:
    groups = [[r] for r in requests] if sequential else [requests]
    pad = lm.batcher.pad_token_id
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


async def compare(lm: LocalLM, pool: list[Request], levels: list[int]) -> None:
    for n in levels:
        sequential = n == 1
        requests = pool[:4] if sequential else pool[:n]
        tokens, b_s = await run_batcher(lm, requests, sequential)
        useful, s_s = run_static(lm, requests, sequential)
        label = "1 (x4)" if sequential else str(n)
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


async def main(levels: list[int], agent_levels: list[int]) -> None:
    lm = LocalLM(LMSettings())
    print(f"model {lm.model_path}  dtype {lm.model.dtype}  threads {torch.get_num_threads()}")
    # Other processes on the same cores slow both engines: the load average tells.
    print(f"load average before: {os.getloadavg()[0]:.1f}")
    pool = make_requests(lm, max(levels + [4]))
    await run_batcher(lm, pool[:4], False)  # warm up both paths
    run_static(lm, pool[:2], False)
    describe("varied", pool)
    await compare(lm, pool, levels)
    agents = agent_requests(lm, max(agent_levels))
    describe("agent (shared system prompt + few-shot turns)", agents)
    await compare(lm, agents, agent_levels)
    await judge(lm, 32)
    reference = reference_requests(lm, max(levels + [4]))
    describe("reference (bare user message, equal outputs)", reference)
    await compare(lm, reference, levels)
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    lm.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 8, 16, 32])
    parser.add_argument("--agent-levels", type=int, nargs="+", default=[8, 16, 32])
    args = parser.parse_args()
    asyncio.run(main(args.levels, args.agent_levels))
