"""Resume after SIGKILL at random moments: nothing saved is paid twice, accounting is exact."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from gepa_opt.persistence import RunStore

CHILD = Path(__file__).with_name("gepa_resume_child.py")
BUDGET = 150


def paid(log: Path) -> list[tuple]:
    return [tuple(json.loads(line)) for line in log.read_text().splitlines() if line.strip()]


def run_child(run_dir: Path, log: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(CHILD.parents[1])}
    return subprocess.Popen(
        [sys.executable, str(CHILD), str(run_dir), str(log), str(BUDGET)],
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )


def test_sigkill_then_resume_pays_nothing_saved_again(tmp_path):
    rng = random.Random(0)
    interrupted = 0
    for round_ in range(6):
        run_dir, killed_log, resumed_log = (
            tmp_path / f"run{round_}",
            tmp_path / f"killed{round_}",
            tmp_path / f"resumed{round_}",
        )
        child = run_child(run_dir, killed_log)
        # kill once it has paid for a random number of pairs, however fast the machine is
        kill_after = rng.randint(8, BUDGET - 20)
        deadline = time.monotonic() + 30
        while child.poll() is None and time.monotonic() < deadline:
            if killed_log.exists() and killed_log.read_text().count("\n") >= kill_after:
                break
            time.sleep(0.002)
        child.send_signal(signal.SIGKILL)
        child.wait()
        saved = RunStore(run_dir).load()
        if saved is None:  # killed before the seed's valset was saved: a fresh start
            continue
        interrupted += child.returncode == -signal.SIGKILL
        saved_pairs = {(d, str(s), i) for (d, s, i) in saved.cache}

        resumed = run_child(run_dir, resumed_log)
        out, _ = resumed.communicate(timeout=60)
        assert resumed.returncode == 0
        final = json.loads(out.strip().splitlines()[-1])
        again = paid(resumed_log) if resumed_log.exists() else []
        # nothing whose result was saved is paid for again
        assert not saved_pairs & set(again)
        assert len(again) == len(set(again))
        # the budget counts exactly what was saved plus what the resumed run paid
        assert final["metric_calls_used"] == saved.metric_calls_used + len(again)
        assert final["metric_calls_used"] <= BUDGET
        # the saved accounting matches the saved results (in-flight pairs were not counted)
        assert saved.metric_calls_used == len(saved_pairs)
    assert interrupted >= 5  # the kills landed mid-run, not after the end
