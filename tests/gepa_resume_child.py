"""A GEPA run the resume tests kill with SIGKILL and then run again: `python -m` target.

    python -m tests.gepa_resume_child RUN_DIR LOG BUDGET [options]   (from the clone's root)

The adapter appends every pair it is called for to LOG (one JSON line each, before it
answers), so the test can count what every process of the run paid. Its trajectories are
plain JSON, so a resumed run can reflect on cached pairs without re-running them.

`--kill WHERE:K` makes the process SIGKILL itself at the start of its K-th call of that
kind, with its other calls still in flight: "seed" (the seed's valset pass, before the
first save), "val" (another candidate's valset pass), "merge" (a merge's calls), "any".
Before dying it appends to `RUN_DIR/kills.jsonl` where it was, for the test to check
that every kind of moment was hit.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import json
import os
import signal
from pathlib import Path

from gepa_opt import EvaluationBatch, GEPAConfig, optimize
from gepa_opt.merge_runner import MergeRunner
from gepa_opt.types import candidate_digest

KEYWORDS = ["cite", "units", "brief", "table", "verify", "cents"]
SEED = {"p": "Answer.", "q": "Reply."}

IN_MERGE: contextvars.ContextVar[bool] = contextvars.ContextVar("in_merge", default=False)
_merge = MergeRunner.run


async def _tagged_merge(self, launch):
    IN_MERGE.set(True)  # the merge's own task: every call it makes inherits the tag
    return await _merge(self, launch)


MergeRunner.run = _tagged_merge  # only observed: the kill point "merge" needs it


class SelfKill:
    """Dies at the K-th call of its kind this process makes."""

    def __init__(self, where: str, run_dir: str) -> None:
        kind, _, k = where.partition(":")
        self.kind, self.left, self.run_dir = kind, int(k), Path(run_dir)

    def at_call(self, candidate: dict, split: str) -> None:
        seed = candidate == SEED
        kinds = {
            "any": True,
            "seed": seed and split == "val",
            "val": not seed and split == "val" and not IN_MERGE.get(),
            "merge": IN_MERGE.get(),
        }
        if not kinds[self.kind]:
            return
        self.left -= 1
        if self.left:
            return
        saved = (self.run_dir / "state.json").exists()
        with (self.run_dir / "kills.jsonl").open("a") as file:
            file.write(json.dumps({"kind": self.kind, "split": split, "saved": saved}) + "\n")
        os.kill(os.getpid(), signal.SIGKILL)


class LoggingAdapter:
    def __init__(self, log: str, kill: SelfKill | None = None) -> None:
        self.log = open(log, "a")  # noqa: SIM115 - open for the whole run
        self.kill = kill

    async def evaluate(self, batch, candidate, capture_traces=False):
        text = " ".join(candidate.values())
        split, example_id = batch[0]["split"], batch[0]["id"]
        # logged when called: a call killed midway was paid all the same
        self.log.write(json.dumps([candidate_digest(candidate), split, example_id]) + "\n")
        self.log.flush()
        if self.kill is not None:
            self.kill.at_call(candidate, split)
        await asyncio.sleep(0.002)
        hits = [t["keyword"] in text for t in batch]
        return EvaluationBatch(
            outputs=[f"answer {t['id']}" for t in batch],
            scores=[float(h) for h in hits],
            trajectories=[
                {"keyword": t["keyword"], "hit": h} for t, h in zip(batch, hits, strict=True)
            ]
            if capture_traces
            else None,
        )

    async def make_reflective_dataset(self, candidate, eval_batch, components):
        records = [
            {
                "Inputs": "task",
                "Generated Outputs": out,
                "Feedback": f"must mention '{t['keyword']}'",
            }
            for out, t in zip(eval_batch.outputs, eval_batch.trajectories, strict=True)
        ]
        return {c: records for c in components}


async def reflect(prompt: str) -> str:
    """Adds a keyword the feedback asks for: "p" the first, "q" the last, so siblings
    win different examples and both lineages stay on the front, for merges to pair."""
    current = prompt.split("```\n", 1)[1].split("\n```", 1)[0]
    wanted = [k for k in KEYWORDS if f"'{k}'" in prompt and k not in current]
    if not wanted:
        return ""
    keyword = wanted[0] if current.startswith(SEED["p"]) else wanted[-1]
    return f"```\n{current} {keyword}\n```"


def tasks(split: str, n: int) -> list[dict]:
    return [{"split": split, "id": i, "keyword": KEYWORDS[i % 6]} for i in range(n)]


async def main(args: argparse.Namespace) -> None:
    kill = None if args.kill is None else SelfKill(args.kill, args.run_dir)
    result = await optimize(
        SEED,
        tasks("train", 12),
        tasks("val", args.val),
        LoggingAdapter(args.log, kill),
        reflect,
        GEPAConfig(
            max_metric_calls=args.budget,
            proposal_shape=args.shape,
            max_concurrency=args.workers,
            use_merge=args.merge,
            siblings=args.siblings,
            run_dir=args.run_dir,
        ),
        example_id=lambda t: t["id"],
    )
    history = [{"iteration": record.iteration} for record in result.history]
    summary = {"metric_calls_used": result.metric_calls_used, "best": result.best_score}
    print(json.dumps({**summary, "history": history}))


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("run_dir")
    parser.add_argument("log")
    parser.add_argument("budget", type=int)
    parser.add_argument("--val", type=int, default=6, help="valset size")
    parser.add_argument("--workers", type=int, default=4, help="max_concurrency")
    parser.add_argument("--shape", default="2x2")
    parser.add_argument("--merge", action="store_true")
    parser.add_argument("--siblings", default="auto", help='"all": lineages for merges')
    parser.add_argument("--kill", help="WHERE:K, e.g. seed:3 (see the module's docstring)")
    return parser.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse()))
