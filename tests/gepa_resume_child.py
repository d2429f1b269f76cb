"""A GEPA run the resume test kills with SIGKILL and then runs again: `python -m` target.

    python -m tests.gepa_resume_child RUN_DIR LOG BUDGET   (from the clone's root)

The adapter appends every pair it is called for to LOG (one JSON line each, before it
answers), so the test can count what every process of the run paid. Its trajectories are
plain JSON, so a resumed run can reflect on cached pairs without re-running them.
"""

from __future__ import annotations

import asyncio
import json
import sys

from gepa_opt import EvaluationBatch, GEPAConfig, optimize
from gepa_opt.types import candidate_digest

KEYWORDS = ["cite", "units", "brief", "table", "verify", "cents"]


class LoggingAdapter:
    def __init__(self, log: str) -> None:
        self.log = open(log, "a")  # noqa: SIM115 - open for the whole run

    async def evaluate(self, batch, candidate, capture_traces=False):
        text = " ".join(candidate.values())
        split, example_id = batch[0]["split"], batch[0]["id"]
        # logged when called: a call killed midway was paid all the same
        self.log.write(json.dumps([candidate_digest(candidate), split, example_id]) + "\n")
        self.log.flush()
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
    current = prompt.split("```\n", 1)[1].split("\n```", 1)[0]
    wanted = [k for k in KEYWORDS if f"'{k}'" in prompt and k not in current]
    return f"```\n{current} {wanted[0]}\n```" if wanted else ""


def tasks(split: str, n: int) -> list[dict]:
    return [{"split": split, "id": i, "keyword": KEYWORDS[i % 6]} for i in range(n)]


async def main(run_dir: str, log: str, budget: int) -> None:
    result = await optimize(
        {"p": "Answer."},
        tasks("train", 12),
        tasks("val", 6),
        LoggingAdapter(log),
        reflect,
        GEPAConfig(
            max_metric_calls=budget, proposal_shape="2x2", max_concurrency=4, run_dir=run_dir
        ),
        example_id=lambda t: t["id"],
    )
    history = [{"iteration": record.iteration} for record in result.history]
    summary = {"metric_calls_used": result.metric_calls_used, "best": result.best_score}
    print(json.dumps({**summary, "history": history}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
