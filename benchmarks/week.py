"""A week of nights: seven consecutive `flywheel run`s over a changing stream
(`benchmarks.week_stream`), as a scheduler runs them, each day with its own trouble:

1. the demo's traffic and labels;
2. no new traces, no new labels (a weekend);
3. new traffic, a few labels, and one label people edited after it was read;
4. labels that say the opposite of the judge in use (drift);
5. a promotion by hand, then a rollback by hand, before the night;
6. the night killed (SIGKILL) at a random moment of its first 30 seconds, then resumed;
7. labels that arrive stamped days before the watermark (a backfill).

Prints one row per night: the judge the night ran on and its held-out agreement, the
watch's verdict on the judge in use, the candidate's held-out gain with its interval, the
gate's decision and the night's wall time (start-up and resume included). The week test
(`tests/e2e/test_week.py`) runs the same scenario with small budgets and checks the
invariants after each night.

    python -m benchmarks.week [--small] [--folder DIR]

Default settings (the real budgets, the 1.5B teacher judging) take 20 minutes to an hour
a night on a 2-core CPU; `--small` takes the test's budgets (minutes a night). The week is
saved after each step: run again with the same `--folder`, a stopped week (a session's end,
a reboot) goes on where it stopped, the night it was stopped in resumed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from mlflow import MlflowClient

from benchmarks.week_stream import WeekStream

FLYWHEEL = str(Path(sys.executable).with_name("flywheel"))
OK, GATE_REFUSED = 0, 4  # the exit codes a night may end with
HAND = "week-bench"  # who promotes and rolls back by hand
KILL_SEED = 57

# The test's budgets: small, so the week fits CI; every knob a night has, still on.
SMALL = {
    "FLYWHEEL_LORA__ENABLED": "false",
    "FLYWHEEL_JUDGE__LORA__ENABLED": "false",
    "FLYWHEEL_AGENT_OPT__MAX_METRIC_CALLS": "12",
    "FLYWHEEL_AGENT_OPT__PARETO_SIZE": "4",
    "FLYWHEEL_AGENT_OPT__REFLECTION_MINIBATCH_SIZE": "2",
    "FLYWHEEL_AGENT_OPT__REFLECTION_MAX_TOKENS": "32",
    "FLYWHEEL_PROMOTION__MIN_EXAMPLES": "5",
    # a judge from 50 labels may take production; it is watched once 15 labels are new to
    # it (Thursday's: Wednesday's 10 are too few to tell), and a drop of 0.3 is drift
    "FLYWHEEL_JUDGE__MIN_AGREEMENT": "-1",
    "FLYWHEEL_JUDGE__MIN_HELDOUT_LABELS": "5",
    "FLYWHEEL_JUDGE__MIN_WATCH_LABELS": "15",
    "FLYWHEEL_JUDGE__MAX_AGREEMENT_DROP": "0.3",
    "FLYWHEEL_JUDGE__UNTRUSTED_NIGHT": "optimize",
}


# what a week records as it goes, beside its settings and its stream
_SAVED = ("nights", "seconds", "verdicts", "prepared", "cpus", "interrupted")


class Week:
    """The state folder and the stream the nights share, and the commands run on them."""

    def __init__(
        self,
        folder: Path,
        settings: dict[str, str],
        by: str = HAND,
        stream: WeekStream | None = None,
    ):
        self.folder = folder
        self.state = folder / "state"
        self.stream = stream or WeekStream(folder / "export")
        self.settings = settings
        self.by = by
        self.env = {
            **os.environ,
            "FLYWHEEL_STATE_DIR": str(self.state),
            "FLYWHEEL_TRACES__JSONL_DIR": str(self.stream.folder),
            "FLYWHEEL_EVAL__HELDOUT_PATH": str(self.stream.folder / "heldout.jsonl"),
            # a full read once the labels have moved a day past the last one (nights 4
            # and 7 here): the late labels of day 7 are found that night, not a week later
            "FLYWHEEL_TRACES__LABEL_FULL_READ_DAYS": "1",
            **settings,
        }
        self.nights: dict[int, str] = {}  # day -> run id
        self.seconds: dict[int, float] = {}  # day -> the night's wall time
        self.verdicts: dict[str, float] = {}  # what the judge in use said of day 4's labels
        self.prepared: list[int] = []  # days whose stream (and hand moves) are in place
        self.cpus: dict[int, str] = {}  # day -> the CPU its night ran on
        self.interrupted: list[int] = []  # nights the week itself was stopped in, resumed

    def save(self) -> None:
        """The week so far, in `week.json`: a week stopped between or inside nights (a
        session's end) goes on from there (`Week.load`)."""
        state = {
            "settings": self.settings,
            "stream": self.stream.state(),
            **{k: getattr(self, k) for k in _SAVED},
        }
        partial = self.folder / ".week.json.partial"  # a stop mid-write keeps the last whole one
        partial.write_text(json.dumps(state, indent=1))
        partial.replace(self.folder / "week.json")

    @classmethod
    def load(cls, folder: Path, settings: dict[str, str]) -> Week:
        """The week saved in `folder`, to go on with the same settings."""
        state = json.loads((folder / "week.json").read_text())
        if state["settings"] != settings:
            raise SystemExit(f"{folder} holds a week run on other settings: {state['settings']}")
        week = cls(folder, settings, stream=WeekStream.restore(folder / "export", state["stream"]))
        week.nights = {int(d): r for d, r in state["nights"].items()}
        week.seconds = {int(d): s for d, s in state["seconds"].items()}
        week.cpus = {int(d): c for d, c in state["cpus"].items()}
        week.verdicts, week.prepared = state["verdicts"], state["prepared"]
        week.interrupted = state["interrupted"]
        return week

    def flywheel(self, day: int, *args: str, timeout: float = 7200) -> subprocess.CompletedProcess:
        """`flywheel ARGS` on day `day`: its window reaches back to that day's traffic."""
        return subprocess.run(
            [FLYWHEEL, *args], env=self._env(day), capture_output=True, text=True, timeout=timeout
        )

    def _env(self, day: int) -> dict[str, str]:
        return self.env | {"FLYWHEEL_TRACES__LOOKBACK_HOURS": str(self.stream.window_hours(day))}

    def night(self, day: int) -> None:
        """Night `day`, run to its end."""
        before, start = self.runs(), time.monotonic()
        done = self.flywheel(day, "run")
        self.check_exit(done)
        (self.nights[day],) = self.runs() - before
        self.seconds[day] = time.monotonic() - start

    def killed_night(self, day: int, after_s: float) -> None:
        """Night `day`, killed (SIGKILL) `after_s` seconds after its run folder appears
        (its first stage), then resumed."""
        before, start = self.runs(), time.monotonic()
        night = subprocess.Popen(
            [FLYWHEEL, "run"],
            env=self._env(day),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = start + 600
        while not self.runs() - before and night.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        try:
            night.wait(timeout=after_s)  # a night that ends first is resumed all the same
        except subprocess.TimeoutExpired:
            night.send_signal(signal.SIGKILL)
            night.wait(timeout=60)
        started = self.runs() - before
        if not started:
            raise RuntimeError(f"night {day} ended (exit {night.returncode}) before it began")
        (run_id,) = started
        self.check_exit(self.flywheel(day, "run", "--resume", run_id))
        self.nights[day] = run_id
        self.seconds[day] = time.monotonic() - start

    def resumed_night(self, day: int, run_id: str) -> None:
        """Night `day`, begun before the week was stopped (`run_id`), resumed to its end;
        its time before the stop is not counted."""
        start = time.monotonic()
        self.check_exit(self.flywheel(day, "run", "--resume", run_id))
        self.nights[day] = run_id
        self.seconds[day] = time.monotonic() - start
        self.interrupted.append(day)

    def check_exit(self, done: subprocess.CompletedProcess) -> None:
        if done.returncode not in (OK, GATE_REFUSED):
            raise RuntimeError(f"`flywheel` ended with exit {done.returncode}:\n{tail(done)}")

    def runs(self) -> set[str]:
        folder = self.state / "runs"
        return {p.name for p in folder.iterdir()} if folder.is_dir() else set()

    def report(self, day: int) -> str:
        return (self.state / "runs" / self.nights[day] / "report.md").read_text()

    def status(self, day: int) -> dict:
        done = self.flywheel(day, "status", "--json")
        self.check_exit(done)
        return json.loads(done.stdout)

    def outbox(self, name: str) -> list[dict]:
        lines = (self.state / "outbox" / f"{name}.jsonl").read_text().splitlines()
        return [json.loads(line) for line in lines]

    @property
    def tracking_uri(self) -> str:
        return f"sqlite:///{self.state.resolve()}/mlflow.db"


def tail(done: subprocess.CompletedProcess) -> str:
    return f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


def judge_label(versions: dict[str, int]) -> str:
    """As `judges.judge.version_label` writes a judge version: "name vN"."""
    return ", ".join(f"{name} v{version}" for name, version in sorted(versions.items()))


def run_week(week: Week, after: Callable[[int], None] = lambda day: None) -> None:
    """The seven days, from the first not yet done; `after(day)` once each night has ended.
    The week is saved after each step, so a stopped week goes on where it stopped."""
    for day, prepare in enumerate(DAYS, start=1):
        if day in week.nights:
            continue
        if day not in week.prepared:
            prepare(week)
            week.prepared.append(day)
            week.save()
        begun = week.runs() - set(week.nights.values())  # a night the week was stopped in
        if begun:
            (run_id,) = begun
            week.resumed_night(day, run_id)
        elif day == 6:
            week.killed_night(day, after_s=random.Random(KILL_SEED).uniform(1, 30))
        else:
            week.night(day)
        week.cpus[day] = cpu()
        week.save()
        after(day)


def _traffic(day: int) -> Callable[[Week], None]:
    """Day `day`'s traffic and labels, nothing else."""
    return lambda week: week.stream.add_day(day)


def _edited(week: Week) -> None:
    week.stream.add_day(3)
    week.stream.edit_a_label()


def _drift(week: Week) -> None:
    """Labels on Wednesday's unlabelled traces, each the opposite of the judge in use."""
    stream = week.stream
    in_use = judge_label(week.status(3)["judge"])
    unlabelled = set(stream.traces_of(3)) - stream.labelled()
    week.verdicts = {
        s["traceId"]: s["value"]
        for s in week.outbox("scores")
        if s["metadata"]["judge_version"] == in_use and s["traceId"] in unlabelled
    }
    stream.add_day(4)
    stream.drift(4, week.verdicts)


def _by_hand(week: Week) -> None:
    for command in ("promote", "rollback"):  # by hand, between the nights
        week.check_exit(week.flywheel(4, command, "--by", week.by))
    week.stream.add_day(5)


def _late(week: Week) -> None:
    week.stream.add_day(7)
    week.stream.late_labels(5)


# what each day brings before its night (day 6's twist is the night itself: killed)
DAYS = (
    _traffic(1),
    _traffic(2),
    _edited,
    _drift,
    _by_hand,
    _traffic(6),
    _late,
)


def night_rows(week: Week) -> list[dict]:
    """Per night, the figures of its MLflow run and its registered version."""
    client = MlflowClient(week.tracking_uri)
    versions = {
        v.tags.get("flywheel.run_id"): v for v in client.search_model_versions("name='agent'")
    }
    rows = []
    for day, run_id in sorted(week.nights.items()):
        (run,) = client.search_runs(
            [e.experiment_id for e in client.search_experiments()],
            f"attributes.run_name = 'nightly-{run_id}'",
        )
        m = run.data.metrics
        version = versions.get(run_id)
        tags = version.tags if version else {}
        low, high = m.get("heldout_gain_low"), m.get("heldout_gain_high")
        rows.append(
            {
                "day": day,
                "judge": tags.get("flywheel.judge_version", "—"),
                "kappa": m.get("judge_used_kappa"),
                "trusted": bool(m.get("judge_trusted")),
                "watch": _watch(m),
                "gain": m.get("heldout_gain_over_production"),
                "interval": (low, high) if low is not None else None,
                "decision": _decision(tags),
                "seconds": week.seconds[day],
                "resumed": day in week.interrupted,
                "cpu": week.cpus.get(day, "—"),
            }
        )
    return rows


def _watch(metrics: dict[str, float]) -> str:
    labels = int(metrics.get("judge_watch_labels", 0))
    if "judge_watch_dropped" not in metrics:
        return "no judge in use"
    if not labels:
        return "no new labels"
    kappa = metrics.get("judge_watch_kappa", float("nan"))
    verdict = "drifted" if metrics["judge_watch_dropped"] else "held"
    return f"κ {kappa:.2f} on {labels}: {verdict}"


def _decision(tags: dict[str, str]) -> str:
    if not tags:
        return "nothing registered"
    return "passed" if tags.get("flywheel.gate.passed") == "true" else "refused"


def table(rows: list[dict]) -> str:
    """The nights as a markdown table; a night the week was stopped in shows the time of
    its resumption only (marked *), and the CPUs, one line each, where nights ran."""
    out = [
        "| night | judge (held-out κ) | trusted | watch on the judge in use | held-out gain "
        "[95% interval] | gate | wall time |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        kappa = f"{r['kappa']:.2f}" if r["kappa"] is not None else "—"
        gain = "—" if r["gain"] is None else f"{r['gain']:+.3f}"
        if r["interval"]:
            gain += f" [{r['interval'][0]:+.3f}, {r['interval'][1]:+.3f}]"
        wall = f"{r['seconds'] / 60:.1f} min{'*' if r['resumed'] else ''}"
        out.append(
            f"| {r['day']} | {r['judge']} ({kappa}) | {'yes' if r['trusted'] else 'no'} | "
            f"{r['watch']} | {gain} | {r['decision']} | {wall} |"
        )
    if any(r["resumed"] for r in rows):
        out.append(
            "\n\\* resumed after the week was stopped: the time before the stop is not counted"
        )
    machines: dict[str, list[int]] = {}
    for r in rows:
        machines.setdefault(r["cpu"], []).append(r["day"])
    out.append("")
    out += [f"nights {', '.join(map(str, days))}: {name}" for name, days in machines.items()]
    return "\n".join(out)


def cpu() -> str:
    """The CPU's model name, as `lscpu` gives it, and its bf16 support: speed figures name
    their machine, and the same model name covers CPUs with and without AMX."""
    info = Path("/proc/cpuinfo").read_text()
    flags = next((line for line in info.splitlines() if line.startswith("flags")), "").split()
    name = next(
        (
            line.split(":", 1)[1].strip()
            for line in info.splitlines()
            if line.startswith("model name")
        ),
        platform.machine(),
    )
    bf16 = (
        "AMX"
        if "amx_bf16" in flags
        else "AVX-512 bf16"
        if "avx512_bf16" in flags
        else "no native bf16"
    )
    return f"{name}, {os.cpu_count()} cores, {bf16}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", action="store_true", help="the week test's budgets")
    parser.add_argument(
        "--folder",
        type=Path,
        help="keep the week here (default: a temp dir); a week stopped there goes on",
    )
    args = parser.parse_args()
    folder = args.folder or Path(tempfile.mkdtemp(prefix="flywheel-week-"))
    settings = SMALL if args.small else {}
    if (folder / "week.json").exists():
        week = Week.load(folder, settings)
        print(f"going on with the week in {folder}: nights {sorted(week.nights)} done", flush=True)
    else:
        folder.mkdir(parents=True, exist_ok=True)
        week = Week(folder, settings)
    started = time.monotonic()
    run_week(week, lambda day: print(f"night {day} done ({week.seconds[day]:.0f} s)", flush=True))
    print(f"\n{'small budgets' if args.small else 'default settings'}")
    print(table(night_rows(week)))
    print(f"\nthe week: {(time.monotonic() - started) / 60:.1f} min; state in {folder}")


if __name__ == "__main__":
    main()
