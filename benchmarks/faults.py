"""What a fault loses: GEPA runs SIGKILLed at random moments and resumed, poison records
among good ones, secrets planted in traces. One table, the README's fault table: what
was tried, and what was lost (the goal: 0 in every row).

- kills: runs of `tests/gepa_resume_child.py` (a GEPA run on a fake adapter, valset 24,
  4 calls in flight, merges on) killed with SIGKILL once inside the seed's valset pass
  and three times later (another valset pass, a merge, anywhere), then resumed to the
  end. Lost: a resume that failed, a pair answered before a kill and paid again, a pair
  charged twice, a run past its budget.
- records: JSONL exports of good traces with one of each poison kind among them
  (nested 600 and 10,000 levels, nested JSON text, a 2 MiB string, a 5,000-digit number,
  a NaN score), read as a night reads them (masked). Lost: a good record not read, or a
  poison one not quarantined by name (a read that raised loses the whole batch).
- secrets: one of each form planted in traces (an API key in text and as a dict key, a
  `password=`, a URL password holding an @, a value under a credential's name, a field of
  a record that is skipped), read and stored as a night does, every log line captured.
  Lost: a secret found in a log line, a skip reason, a read record or a file written.

    python -m benchmarks.faults [--runs 8] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import random
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from gepa_opt.snapshot_json import decode_key
from infra.redaction import Redactor
from infra.traces.jsonl import JsonlTraceSource
from infra.traces.redacting import RedactingTraceSource

ROOT = Path(__file__).resolve().parents[1]
MERGE_RUN = ("--val", "24", "--merge", "--siblings", "all")
WORKERS = 4  # the child's calls in flight: at most these are asked again after a kill


# kills


def _child(run_dir: Path, log: Path, budget: int, *options: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = ["-m", "tests.gepa_resume_child", str(run_dir), str(log), str(budget), *options]
    return subprocess.run(
        [sys.executable, *command], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def _lines(path: Path) -> list[dict | list]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _pair(encoded: list[str]) -> tuple:
    digest, split, example_id = decode_key(encoded)
    return (digest, split.value, example_id)


def kill_runs(runs: int, rng: random.Random, folder: Path) -> dict[str, int]:
    tried = Counter()
    for run in range(runs):
        run_dir, log = folder / f"run{run}", folder / f"paid{run}.jsonl"
        budget = rng.choice([24, 35, 150, 240])
        later = [f"val:{rng.randint(1, 30)}", f"merge:{rng.randint(1, 12)}"]
        later.append(f"any:{rng.randint(1, 80)}")
        kills = 0
        for kill in [f"seed:{rng.randint(1, 24)}", *rng.sample(later * 2, 3)]:
            saved = {_pair(x["done"]) for x in _lines(run_dir / "calls.jsonl") if "done" in x}
            before = len(_lines(log))
            done = _child(run_dir, log, budget, "--kill", kill, *MERGE_RUN)
            if done.returncode == -signal.SIGKILL:
                kills += 1
            elif done.returncode != 0:
                tried["resumes failed"] += 1
            calls = [tuple(x) for x in _lines(log)]
            tried["saved pairs paid again"] += len(saved & set(calls[before:]))
        final = _child(run_dir, log, budget, *MERGE_RUN)
        if final.returncode != 0:
            tried["resumes failed"] += 1
            continue
        used = json.loads(final.stdout.strip().splitlines()[-1])["metric_calls_used"]
        journal = _lines(run_dir / "calls.jsonl")
        charged = Counter(_pair(x["paid"]) for x in journal if "paid" in x)
        tried["pairs charged twice"] += sum(n - 1 for n in charged.values())
        tried["runs past budget"] += used > budget
        calls = [tuple(x) for x in _lines(log)]
        tried["calls asked again past the in-flight bound"] += max(
            0, len(calls) - len(set(calls)) - WORKERS * kills
        )
        tried["kills"] += kills
        tried["runs"] += 1
    return dict(tried)


# poison records


def _trace(i: int) -> dict:
    return {
        "id": f"o{i}",
        "traceId": f"t{i}",
        "name": "route",
        "startTime": "2026-12-01T10:00:00Z",
        "input": [{"role": "user", "content": f"question {i}"}],
        "output": "card_arrival",
    }


def _score(i: int, value: float = 1) -> dict:
    return {
        "id": f"s{i}",
        "traceId": f"t{i}",
        "name": "correct",
        "value": value,
        "dataType": "BOOLEAN",
        "source": "ANNOTATION",
        "timestamp": "2026-12-01T11:00:00Z",
    }


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


POISON = {  # kind -> a poison trace line (JSON text) made from trace i
    "nested 600 levels": lambda i: json.dumps({**_trace(i), "input": "@"}).replace(
        '"@"', _nested(600)
    ),
    "nested 10,000 levels": lambda i: json.dumps({**_trace(i), "input": "@"}).replace(
        '"@"', _nested(10_000)
    ),
    "JSON text nested 10,000 levels": lambda i: json.dumps({**_trace(i), "input": _nested(10_000)}),
    "a 2 MiB string": lambda i: json.dumps({**_trace(i), "output": "x" * (2 << 20)}),
    "a 5,000-digit number": lambda i: json.dumps(_trace(i)).replace('"route"', "9" * 5000),
}


def poison_reads(trials: int, rng: random.Random, folder: Path) -> dict[str, int]:
    tried = Counter()
    for trial in range(trials):
        export = folder / f"export{trial}"
        export.mkdir()
        lines, good, poison = [], [], []
        for i in range(1, 41):
            if i % 8 == 0:
                kind = rng.choice(list(POISON))
                lines.append(POISON[kind](i))
                poison.append(f"o{i}")
            else:
                lines.append(json.dumps(_trace(i)))
                good.append(f"o{i}")
        scores = [_score(i) for i in range(1, 41) if f"o{i}" in good]
        scores.append(_score(99, math.nan))  # a NaN label
        (export / "observations.jsonl").write_text("\n".join(lines) + "\n")
        (export / "scores.jsonl").write_text("\n".join(json.dumps(s) for s in scores) + "\n")
        tried["records"] += len(lines) + len(scores)
        tried["poison records"] += len(poison) + 1
        source = RedactingTraceSource(JsonlTraceSource(export), Redactor.standard())
        try:
            batch = source.fetch(since=None, limit=1000)
        except Exception:  # the whole batch is lost
            tried["records lost"] += len(good) + len(scores) - 1
            tried["batches that raised"] += 1
            continue
        read = {t.id for t in batch.traces}
        tried["records lost"] += len(set(good) - read) + len(set(poison) & read)
        tried["records lost"] += len(scores) - 1 - len(batch.annotations)
        tried["poison not named"] += len(poison) + 1 - len(batch.skipped)
    return dict(tried)


# secrets

API_KEY = "sk-proj-4f9aQ2mZr8LxT1vB6nW3yK0cH5jD7eU9sA"
PLANTED = {
    "an API key in text": API_KEY,
    "password=": "hunter2-planted",
    "a URL password holding an @": "x0r-pl4nted",
    "a secret as a dict key": "ghp_4f9aQ2mZr8LxT1vB6nW3yK0cH5jD7eU9sAbc",
    "a value under a credential's name": "Tr0ub4dor-planted",
    "a field of a skipped record": "zebra-planted",
}


def _with_secrets() -> tuple[list[dict], list[dict]]:
    s = PLANTED
    said = f"my key is {s['an API key in text']}, log in with password={s['password=']} please"
    url = f"postgres://bob:h@{s['a URL password holding an @']}@42@db.example.com/app"
    metadata = {
        s["a secret as a dict key"]: "pasted",
        "db_password": s["a value under a credential's name"],
    }
    trace = {
        **_trace(1),
        "input": [{"role": "user", "content": said}],
        "output": f"it lives at {url}",
        "metadata": metadata,
    }
    skipped = {**_trace(2), "promptVersion": s["a field of a skipped record"]}
    label = {**_score(1), "comment": f"password={s['password=']}"}
    return [trace, skipped], [label]


def secret_leaks(folder: Path) -> dict[str, int]:
    from flows.night.runtime import Runtime
    from infra.settings import Settings, TraceSettings

    traces, scores = _with_secrets()
    (folder / "observations.jsonl").write_text("\n".join(json.dumps(t) for t in traces) + "\n")
    (folder / "scores.jsonl").write_text("\n".join(json.dumps(s) for s in scores) + "\n")
    logged: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            logged.append(self.format(record))

    handler, root = Keep(logging.DEBUG), logging.getLogger()
    root.addHandler(handler)
    level, root.level = root.level, logging.DEBUG
    try:
        state = folder / "state"
        rt = Runtime(Settings(state_dir=state, traces=TraceSettings(jsonl_dir=str(folder))))
        batch = rt.traces.fetch(since=None, limit=10)
        labels = rt.traces.fetch_labels("correct", since=None)
        rt.labels.add(labels.annotations, batch.traces)
    finally:
        root.removeHandler(handler)
        root.level = level
    seen = {
        "log lines": "\n".join(logged),
        "skip reasons": " ".join(s.reason for s in batch.skipped + labels.skipped),
        "records read": repr(batch.traces) + repr(labels.annotations),
        "files written": b"".join(p.read_bytes() for p in state.rglob("*") if p.is_file()).decode(
            errors="replace"
        ),
    }
    leaks = Counter()
    for secret in PLANTED.values():
        for where, text in seen.items():
            leaks[f"found in {where}"] += secret in text
    return {"secrets planted": len(PLANTED), "places checked": len(seen), **leaks}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=8, help="GEPA runs killed (4 kills each)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "kills").mkdir()
        (folder / "records").mkdir()
        (folder / "secrets").mkdir()
        kills = kill_runs(args.runs, rng, folder / "kills")
        records = poison_reads(args.runs * 4, rng, folder / "records")
        secrets = secret_leaks(folder / "secrets")
    rows = [
        (
            f"GEPA runs killed with SIGKILL and resumed: {kills.get('runs', 0)} runs, "
            f"{kills.get('kills', 0)} kills landed",
            sum(v for k, v in kills.items() if k not in ("runs", "kills")),
            ", ".join(f"{k} {v}" for k, v in kills.items() if k not in ("runs", "kills")),
        ),
        (
            f"records read: {records['records']}, of them poison: {records['poison records']}",
            records.get("records lost", 0) + records.get("poison not named", 0),
            ", ".join(f"{k} {v}" for k, v in records.items() if "record" not in k or "lost" in k),
        ),
        (
            f"secrets planted: {secrets['secrets planted']} forms, "
            f"{secrets['places checked']} places checked",
            sum(v for k, v in secrets.items() if k.startswith("found")),
            ", ".join(f"{k} {v}" for k, v in secrets.items() if k.startswith("found")),
        ),
    ]
    print("| fault | lost | of which |")
    print("|---|---|---|")
    for tried, lost, detail in rows:
        print(f"| {tried} | {lost} | {detail} |")
    print(f"faults: {sum(lost for _, lost, _ in rows)} lost")


if __name__ == "__main__":
    main()
