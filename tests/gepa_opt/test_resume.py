"""Resume after SIGKILL at random moments: the calls paid at the adapter, over every process
of a run, never exceed the budget, and nothing answered before a kill is paid again.

A call in flight at a kill was made and stays charged; the resumed run asks that pair
again without a second charge (`gepa_opt.journal`), so the adapter may see a pair twice,
at most WORKERS per kill, while the pairs it was paid for stay within the budget.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from gepa_opt.journal import CallJournal
from gepa_opt.snapshot_json import decode_key

ROOT = Path(__file__).resolve().parents[2]
BUDGET = 150
WORKERS = 4  # the child's max_concurrency: at most this many calls in flight at a kill
# A run ends once a group's worst case no longer fits (about BUDGET - 20), and re-asks up to
# WORKERS lost calls per kill: a kill drawn below this always lands; one drawn later may find
# the run already ended, which is fine (it still tests the budget's edge).
SURE_TO_LAND = 100


def paid(log: Path) -> list[tuple]:
    """Every pair the adapter was called for, in every process (the child appends). A
    line the child is writing while we read has no newline yet: it is not counted."""
    if not log.exists():
        return []
    *whole, _ = log.read_text().split("\n")
    return [tuple(json.loads(line)) for line in whole if line.strip()]


def run_child(run_dir: Path, log: Path, budget: int = BUDGET, *options: str) -> subprocess.Popen:
    """`options`: the child's (`tests/gepa_resume_child.py`)."""
    # as a module from the clone's root: run as a script, its folder (tests/) would come
    # first on sys.path, and tests/gepa_opt/ would stand in for the real gepa_opt
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = ["-m", "tests.gepa_resume_child", str(run_dir), str(log), str(budget), *options]
    return subprocess.Popen(
        [sys.executable, *command],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )


def kill_after(run_dir: Path, log: Path, calls: int) -> bool:
    """Start the run (or resume it) and SIGKILL it once the adapter has paid `calls` pairs
    in all; True if the kill landed before the run ended on its own."""
    child = run_child(run_dir, log)
    deadline = time.monotonic() + 30
    while child.poll() is None and time.monotonic() < deadline:
        if len(paid(log)) >= calls:
            break
        time.sleep(0.002)
    child.send_signal(signal.SIGKILL)
    child.wait()
    return child.returncode == -signal.SIGKILL


def test_budget_holds_at_the_adapter_across_many_sigkills(tmp_path):
    rng = random.Random(0)
    early_kills_missed = 0
    for run in range(3):
        run_dir, log = tmp_path / f"run{run}", tmp_path / f"paid{run}.jsonl"
        kills = sorted(rng.sample(range(6, BUDGET - 10), 5))
        landed = [kill_after(run_dir, log, calls) for calls in kills]
        early_kills_missed += sum(
            not hit for calls, hit in zip(kills, landed, strict=True) if calls < SURE_TO_LAND
        )
        finished = run_child(run_dir, log)
        out, _ = finished.communicate(timeout=60)
        assert finished.returncode == 0
        final = json.loads(out.strip().splitlines()[-1])
        calls = paid(log)
        # the pairs the adapter was paid for, across all six processes, stay in the budget,
        # and the run's own count covers them (a call journaled but killed before the
        # adapter logged it counts too)
        assert len(set(calls)) <= final["metric_calls_used"] <= BUDGET
        # a pair is asked again only if it was in flight (sent, unanswered) at a kill
        again = sum(n - 1 for n in Counter(calls).values())
        assert again <= 5 * WORKERS
        # proposals in flight at a kill were finished, not started over under new numbers
        iterations = [record["iteration"] for record in final["history"]]
        assert len(iterations) == len(set(iterations))
        assert final["best"] > 0
    assert early_kills_missed == 0  # the kills landed mid-run, not after the end


def test_the_journal_counts_calls_paid_after_a_snapshot_and_skips_a_cut_line(tmp_path):
    from gepa_opt.cache import CachedEvaluation, Split
    from gepa_opt.journal import CallJournal

    journal = CallJournal(tmp_path / "calls.jsonl")
    journal.paid([("a", Split.VAL, 1)])
    journal.done(("a", Split.VAL, 1), CachedEvaluation("out", 1.0, {"t": 1}, None))
    offset = journal.offset  # a snapshot taken here holds the above
    journal.paid([("b", Split.TRAIN, 2), ("b", Split.TRAIN, "x")])
    journal.done(("b", Split.TRAIN, 2), CachedEvaluation("o", 0.5, object(), {"cost": 2.0}))
    journal.reflected(7, "p", "new text")
    journal.close()
    with (tmp_path / "calls.jsonl").open("a") as file:
        file.write('{"paid": ["c", "val"')  # the kill cut this line short
    replayed = CallJournal(tmp_path / "calls.jsonl").replay(offset)
    assert replayed.paid == 2  # ("b", "x") was paid and never answered: it still counts
    ((key, entry),) = replayed.results.items()
    assert key == ("b", Split.TRAIN, 2) and entry.score == 0.5
    assert entry.objective_scores == {"cost": 2.0}
    assert replayed.reflections == {(7, "p"): "new text"}
    assert CallJournal(tmp_path / "calls.jsonl").replay(0).paid == 3


def test_the_journal_names_the_pairs_a_kill_left_unanswered_before_or_after_the_save(tmp_path):
    from gepa_opt.cache import CachedEvaluation, Split

    journal = CallJournal(tmp_path / "calls.jsonl")
    lost_before, answered, failed, failed_then_lost = (("a", Split.VAL, i) for i in range(4))
    journal.paid([lost_before, answered, failed, failed_then_lost])
    journal.done(answered, CachedEvaluation("out", 1.0, None))
    offset = journal.offset  # a save here: lost_before is in flight, charged in the snapshot
    journal.failed(failed)
    journal.failed(failed_then_lost)
    journal.paid([failed_then_lost])  # charged again by a later evaluation, then killed
    journal.close()
    replayed = CallJournal(tmp_path / "calls.jsonl").replay(offset)
    assert replayed.unanswered == {lost_before, failed_then_lost}
    assert replayed.paid == 1 - 2  # two charges given back, one new


def journal_lines(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "calls.jsonl").read_text().splitlines()]


def answered(run_dir: Path) -> set[tuple]:
    """The pairs whose answers the journal holds, as the adapter logs them."""
    return {_as_logged(line["done"]) for line in journal_lines(run_dir) if "done" in line}


def _as_logged(encoded: list[str]) -> tuple:
    digest, split, example_id = decode_key(encoded)
    return (digest, split.value, example_id)


def killed_at(run_dir: Path, log: Path, budget: int, kill: str, *options: str) -> bool:
    """Run (or resume) the run until its kill point (`--kill`); True if it landed, False
    if the run ended on its own first. Any other ending is a failed resume."""
    child = run_child(run_dir, log, budget, "--kill", kill, *options)
    _, err = child.communicate(timeout=60)
    assert child.returncode in (0, -signal.SIGKILL), err[-2000:]
    return child.returncode == -signal.SIGKILL


def finish(run_dir: Path, log: Path, budget: int, *options: str) -> dict:
    child = run_child(run_dir, log, budget, *options)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err[-2000:]
    return json.loads(out.strip().splitlines()[-1])


def assert_paid_once_within(budget: int, run_dir: Path, calls: list[tuple], kills: int, final):
    """Every call journaled as paid was made, every pair made was journaled once, and the
    run's count of them is the budget's: only the calls lost at a kill were asked again."""
    paid_pairs = [_as_logged(line["paid"]) for line in journal_lines(run_dir) if "paid" in line]
    assert Counter(paid_pairs) == Counter(set(calls))  # each pair charged once, when sent
    assert CallJournal(run_dir / "calls.jsonl").replay(0).paid == final["metric_calls_used"]
    assert len(paid_pairs) == final["metric_calls_used"] <= budget
    assert len(calls) - len(set(calls)) <= WORKERS * kills


def test_a_run_killed_inside_the_seed_s_valset_pass_resumes_on_a_budget_that_just_fits(
    tmp_path,
):
    """The issue's case: a valset that takes the whole budget, killed twice inside the
    seed's pass with calls in flight. Before, every call of the pass was journaled as
    paid before it was sent, and no resume on that budget could start."""
    val = 20
    options = ("--val", str(val), "--workers", "2")
    run_dir, log = tmp_path / "run", tmp_path / "paid.jsonl"
    assert killed_at(run_dir, log, val, "seed:6", *options)  # 4 answered, 2 in flight
    assert not (run_dir / "state.json").exists()
    assert len(answered(run_dir)) == 4
    assert killed_at(run_dir, log, val, "seed:9", *options)
    final = finish(run_dir, log, val, *options)
    calls = paid(log)
    assert final["metric_calls_used"] == val and len(set(calls)) == val
    assert_paid_once_within(val, run_dir, calls, kills=2, final=final)


MERGE_RUN = ("--val", "24", "--merge", "--siblings", "all")  # 24 examples, WORKERS slots


def kill_points(rng: random.Random) -> list[str]:
    """A run's kills, one per process: inside the seed's valset pass (before the first
    save), then inside another valset pass, a merge, or anywhere."""
    later = [
        f"val:{rng.randint(1, 30)}",
        f"merge:{rng.randint(1, 12)}",
        f"any:{rng.randint(1, 80)}",
    ]
    return [f"seed:{rng.randint(1, 24)}", *rng.sample(later * 2, 3)]


def test_every_resume_succeeds_within_the_budget_and_pays_nothing_saved_again(tmp_path):
    rng = random.Random(0)
    landed: Counter[str] = Counter()
    for run in range(8):
        run_dir, log = tmp_path / f"run{run}", tmp_path / f"paid{run}.jsonl"
        budget = rng.choice([24, 35, 150, 240])  # 24: the seed's pass takes it all
        kills, calls_before = 0, 0
        for kill in kill_points(rng):
            saved = answered(run_dir) if run_dir.exists() else set()
            if killed_at(run_dir, log, budget, kill, *MERGE_RUN):
                kills += 1
            calls = paid(log)
            assert not saved & set(calls[calls_before:])  # nothing answered is paid again
            calls_before = len(calls)
        saved = answered(run_dir)
        final = finish(run_dir, log, budget, *MERGE_RUN)
        calls = paid(log)
        assert not saved & set(calls[calls_before:])
        assert_paid_once_within(budget, run_dir, calls, kills, final)
        landed.update(json.loads(line)["kind"] for line in (run_dir / "kills.jsonl").open())
    # the kills hit every kind of moment (a kill point a run never reached did not land)
    assert landed["seed"] == 8 and landed["val"] and landed["merge"] and landed["any"]
