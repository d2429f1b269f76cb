"""LoRA training with and without the heap trimmed every 10 s, side by side.

Each arm is a fresh process that trains the embedded agent's adapter on a night's SFT
records (`<state>/runs/<night>/lora-step<k>/training/sft.jsonl`) for `--steps` optimizer
steps on the default `[lora]` settings, and prints its training seconds, user and system
CPU seconds, minor page faults and loss. Arms alternate (untrimmed, trimmed, untrimmed, ...)
so that a machine slowing down during the run shows as a drift, not as an arm's cost.

    .venv/bin/python -m benchmarks.heap_trim --records <sft.jsonl> [--steps 4] [--rounds 1]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

ARM = """
import json, sys, tempfile, time
from infra.lm import heap
if sys.argv[1] == "trimmed":
    assert heap.keep_heap_trimmed()
from infra.lm.model_files import resolve_model_path
from infra.settings import Settings
from weights.lora import train_sft_adapter

def counters():
    fields = open("/proc/self/stat").read().split(")")[1].split()
    return int(fields[7]), int(fields[11]) / 100, int(fields[12]) / 100  # minflt, utime, stime

settings = Settings()
cfg = settings.lora.model_copy(update={"max_steps": int(sys.argv[3])})
records = [json.loads(line) for line in open(sys.argv[2])]
faults, user, system = counters()
began = time.time()
result = train_sft_adapter(
    records, resolve_model_path(settings.lm.model_path), tempfile.mkdtemp() + "/a", cfg
)
end = counters()
print(json.dumps({
    "arm": sys.argv[1], "steps": result.steps, "seconds": round(time.time() - began, 1),
    "user_s": round(end[1] - user, 1), "system_s": round(end[2] - system, 1),
    "minor_faults": end[0] - faults, "loss": round(result.train_loss, 4),
}))
"""


def run_arm(arm: str, records: str, steps: int) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", ARM, arm, records, str(steps)], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"the {arm} arm failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", required=True, help="a night's training/sft.jsonl")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=1, help="trimmed arms (one more plain)")
    args = parser.parse_args()
    arms = ["default"] + ["trimmed", "default"] * args.rounds
    header = ("arm", "steps", "seconds", "user s", "sys s", "faults M", "loss")
    print(f"{header[0]:<9}" + "".join(f"{h:>9}" for h in header[1:]))
    for arm in arms:
        r = run_arm(arm, args.records, args.steps)
        print(
            f"{r['arm']:<9}{r['steps']:>9}{r['seconds']:>9}{r['user_s']:>9}{r['system_s']:>9}"
            f"{r['minor_faults'] / 1e6:>9.1f}{r['loss']:>9}",
            flush=True,
        )


if __name__ == "__main__":
    main()
