"""The demo night, measured (`make bench-demo`): wall time and peak memory stage by
stage, and what the night achieved against the targets it is held to: the judge's
held-out kappa with its interval and its injection flips, the candidate's held-out gain
over production with its paired interval, and whether it was promoted.

Runs the real nightly flow on the embedded defaults in a fresh state folder, samples
the process's resident memory every 0.1 s, and attributes the peak to the stage whose
interval the sample falls in. `--nights 2` runs a second night on the same state folder
(it starts from what the first promoted, as the next `make demo` would).

    .venv/bin/python benchmarks/demo.py [--nights N] [--first-night K] [--keep-state DIR]
        [--keep-free-heap]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import threading
import time
from pathlib import Path

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


class MemorySampler(threading.Thread):
    def __init__(self, every_s: float = 0.1):
        super().__init__(daemon=True)
        self.every_s, self.samples, self._halt = every_s, [], threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            self.samples.append((time.time(), rss_bytes()))
            self._halt.wait(self.every_s)

    def stop(self) -> None:
        self._halt.set()
        self.join()

    def peak(self, start: float, end: float) -> int:
        inside = [rss for t, rss in self.samples if start <= t <= end]
        return max(inside, default=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keep-state", help="state folder to use (default: a temporary one)")
    parser.add_argument(
        "--keep-free-heap",
        action="store_true",
        help="never hand freed heap back to the OS (`infra.lm.heap`): the night before it did",
    )
    parser.add_argument("--nights", type=int, default=1, help="nights in a row (default 1)")
    parser.add_argument(
        "--first-night",
        type=int,
        default=1,
        help="number of the first night (default 1): with --keep-state, 2 runs the night "
        "after a finished first one; the same number resumes that night",
    )
    args = parser.parse_args()
    if args.keep_free_heap:
        from infra.lm import heap

        heap._trim = None
    state = Path(args.keep_state or tempfile.mkdtemp(prefix="flywheel-bench-"))
    os.environ["FLYWHEEL_STATE_DIR"] = str(state)

    from flows.plumbing.environment import prepare_environment
    from infra.settings import Settings

    settings = Settings()
    prepare_environment(settings.state_dir)
    from flows.night.runtime import Runtime
    from flows.nightly import nightly
    from flows.report.summary import print_summary

    rt = Runtime(settings)  # the second night reuses the loaded models: no second start-up
    for night in range(args.first_night, args.first_night + args.nights):
        sampler = MemorySampler()
        sampler.start()
        start = time.time()
        report = asyncio.run(nightly(run_id=f"bench{night}", knobs=settings.knobs(), runtime=rt))
        total = time.time() - start
        sampler.stop()
        print_summary(report)
        peak = sampler.peak(start, time.time()) / 2**20
        print(f"\nnight {night}: {total:.1f} s wall, peak RSS {peak:.0f} MiB")
        print(f"{'stage':<16}{'seconds':>9}{'peak RSS MiB':>14}")
        for name, (begin, end) in report.stage_intervals.items():
            print(f"{name:<16}{end - begin:>9.1f}{sampler.peak(begin, end) / 2**20:>14.0f}")
        first = min(b for b, _ in report.stage_intervals.values())
        print(f"{'(start-up)':<16}{first - start:>9.1f}")
        for line in targets(report):
            print(line)


def targets(report) -> list[str]:
    """The figures the demo night is held to, with their intervals."""
    used = report.gate.judge
    k = used.heldout
    out = [
        f"judge: {used.label}, held-out kappa {k.get('kappa', float('nan')):.3f} "
        f"[{k.get('kappa_low', float('nan')):.3f}, {k.get('kappa_high', float('nan')):.3f}], "
        f"trusted {report.judge_trusted}"
    ]
    if report.gate.injection is not None:
        out.append(f"injection flips: {report.gate.injection.share:.3f}")
    decision = report.promotion
    if decision is not None:
        interval = "none" if decision.low is None else f"[{decision.low:.3f}, {decision.high:.3f}]"
        moved = report.moved is not None and report.moved.action == "promoted"
        out.append(
            f"candidate: held-out gain {decision.gain:+.3f} {interval}, gate "
            f"{'passed' if decision.passed else 'refused'}, promoted {moved}"
        )
    return out


if __name__ == "__main__":
    main()
