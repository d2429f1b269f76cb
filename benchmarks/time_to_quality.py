"""One benchmark run's record, and time to quality read from the runs of a setting.

Each engine's timeline holds (seconds, its own best candidate then), one point per pool
entry; the referee's val score of each point's candidate makes the engines comparable.
An engine's time to quality is the first point at the bar (A's final referee score). The
floor of a seed is the earliest any engine held a candidate beyond the seed: every
engine pays one proposal's chain (minibatch, reflection, minibatch, valset pass) before
its first candidate, upstream after the seed's valset pass and gepa_opt beside it, and
the floor is the fastest such chain measured. Where A reached the bar before twice the
floor, "half of A's time" is out of reach in that seed for every engine run, however it
schedules: the report counts those seeds.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from statistics import fmean, stdev


@dataclass
class Run:
    engine: str
    label: str
    setting: str
    seed: int
    wall_s: float
    metric_calls: int
    budget: int
    reflection_calls: int
    utilization: float
    best_val: float
    best_candidate: dict[str, str]
    timeline: list[tuple[float, dict[str, str]]]
    """(seconds since the start, the engine's own best candidate then), per pool entry."""
    seed_val: float
    referee: list[tuple[float, float]] = field(default_factory=list)
    """(seconds, the referee's val score of the timeline's candidate)."""
    ref_val: float = float("nan")
    """The referee's val score of the final best candidate."""
    predicted_s: float = float("nan")
    """The runtime model's wall time, from this run's measured latencies."""
    test: float = float("nan")
    ttq_s: float | None = None
    depth: int = 0
    """Generations on the final best candidate's lineage (the longest, through merges)."""
    admitted: list[float] = field(default_factory=list)
    """The engine's own val score of each candidate it added to its pool after the seed:
    one per valset pass that joined the pool, in the order they joined."""

    @property
    def overshoot(self) -> int:
        return max(0, self.metric_calls - self.budget)


def lineage_depth(parents: list[list[int | None]] | list[tuple[int, ...]], idx: int) -> int:
    """Longest chain of parents from candidate `idx` back to the seed."""
    known = [p for p in parents[idx] if p is not None]
    return 1 + max(lineage_depth(parents, p) for p in known) if known else 0


EPS = 1e-9


def choose_bar(finals: dict[str, float], seed: float) -> tuple[float, str]:
    """A's final referee score; if that is not above the seed's, the best final score of
    any engine. `finals`: engine -> final ref_val (one seed's, or the seeds' mean)."""
    best_any = max(finals.values())
    if "A" not in finals:
        return best_any, "A not run: bar = best ref_val of any engine"
    if finals["A"] > seed + EPS:
        return finals["A"], "bar = ref_val of A's final candidate"
    if best_any > seed + EPS:
        return best_any, "A's final candidate is not above the seed: bar = best ref_val"
    return best_any, "no engine's final candidate is above the seed: bar = the seed's"


def quality_bar(runs: dict[str, Run]) -> tuple[float, str]:
    seed = next(iter(runs.values())).referee[0][1]  # the same text for every engine
    return choose_bar({e: r.ref_val for e, r in runs.items()}, seed)


def time_to_quality(referee: list[tuple[float, float]], bar: float) -> float | None:
    return next((t for t, score in referee if score >= bar - EPS), None)


HEADER = (
    f"{'engine':<22}{'setting':<9}{'seed':>4}{'wall_s':>8}{'pred_s':>8}{'calls':>7}{'over':>6}"
    f"{'refl':>6}{'util':>6}{'seed_val':>9}{'best_val':>9}{'ref_val':>8}{'test':>7}{'ttq_s':>8}"
    f"{'depth':>6}"
)


def row(run: Run) -> str:
    ttq = "never" if run.ttq_s is None else f"{run.ttq_s:.1f}"
    return (
        f"{run.label:<22}{run.setting:<9}{run.seed:>4}{run.wall_s:>8.1f}{run.predicted_s:>8.1f}"
        f"{run.metric_calls:>7}"
        f"{run.overshoot:>6}{run.reflection_calls:>6}{run.utilization:>6.2f}"
        f"{run.seed_val:>9.3f}{run.best_val:>9.3f}{run.ref_val:>8.3f}{run.test:>7.3f}{ttq:>8}"
        f"{run.depth:>6}"
    )


def report_group(runs: dict[str, Run]) -> None:
    bar, note = quality_bar(runs)
    for run in runs.values():
        run.ttq_s = time_to_quality(run.referee, bar)
    first = next(iter(runs.values()))
    print(f"\n{first.setting}, seed {first.seed}: quality bar {bar:.3f} ({note})")
    print(HEADER)
    for run in runs.values():
        print(row(run))
    floor = floor_s(runs)
    if floor is not None:
        print(f"the first candidate beyond the seed any engine held: {floor:.1f} s (the floor)")
    sys.stdout.flush()


def floor_s(runs: dict[str, Run]) -> float | None:
    """The earliest any engine held a candidate beyond the seed (a timeline's second
    point; its first is the seed), or None where none did."""
    return min((run.timeline[1][0] for run in runs.values() if len(run.timeline) > 1), default=None)


TARGETS = {"A": 0.5, "B": 0.67}
"""Issue 14's time-to-quality targets: at most this share of A's and of B's time."""


def floor_line(groups: list[dict[str, Run]], den: str) -> str | None:
    """What no engine could beat against `den`: the floor over den's time to quality, as a
    ratio of means over the seeds where den reached the bar, and in how many of them the
    floor alone is above the target share of den's time."""
    seeds = [(floor_s(g), g[den].ttq_s) for g in groups if den in g]
    seeds = [(f, t) for f, t in seeds if f is not None and t is not None]
    if not seeds:
        return None
    value = fmean(f for f, _ in seeds) / fmean(t for _, t in seeds)
    beyond = sum(f > TARGETS[den] * t + EPS for f, t in seeds)
    return (
        f"  floor/{den}: {value:.2f} (ratio of means over the {len(seeds)} seeds where {den} "
        f"reached the bar); {TARGETS[den]}x {den}'s time was out of reach for every engine "
        f"in {beyond} of them"
    )


def ratio(groups: list[dict[str, Run]], num: str, den: str) -> str:
    pairs = [
        (g[num].ttq_s, g[den].ttq_s)
        for g in groups
        if num in g and den in g and g[num].ttq_s is not None and g[den].ttq_s is not None
    ]
    if not pairs:
        return f"  {num}/{den} time to quality: n/a (no seed where both reached the bar)"
    value = fmean(n for n, _ in pairs) / fmean(d for _, d in pairs)
    seeds = f"{len(pairs)}/{len(groups)} seeds"
    return f"  {num}/{den} time to quality: {value:.2f} (ratio of means over {seeds})"


def mean_curve(runs: list[Run]) -> list[tuple[float, float]]:
    """The referee score of what each run would return if stopped at t, averaged over
    the runs (seeds), at every t where one of them changes."""
    times = sorted({t for run in runs for t, _ in run.referee})

    def at(run: Run, t: float) -> float:
        """The last point at or before t; before its first point, the seed's score."""
        return next(
            (score for when, score in reversed(run.referee) if when <= t + EPS), run.referee[0][1]
        )

    return [(t, fmean(at(run, t) for run in runs)) for t in times]


def _sd(values: list[float]) -> float:
    return stdev(values) if len(values) > 1 else 0.0


def admitted_line(engine: str, runs: list[Run]) -> str:
    """How good the engine's valset passes were: of the candidates it admitted after the
    seed, how many scored above the seed on val. Final scores are the best of a few such
    passes, so two engines can end level while one's passes are mostly worse than the
    seed; this reads the draws themselves."""
    scores = [(score, run.seed_val) for run in runs for score in run.admitted]
    above = sum(score > seed + EPS for score, seed in scores)
    share = f"{above / len(scores):.2f}" if scores else "n/a"
    return (
        f"  {engine}: {len(scores)} admitted after the seed ({len(scores) / len(runs):.1f} per "
        f"seed), {above} above the seed's val ({share})"
    )


def report_setting(setting: str, groups: list[dict[str, Run]]) -> None:
    print(f"\n== {setting}: time to quality, per seed (means over seeds where both reached) ==")
    engines = sorted({e for g in groups for e in g})
    pairs = [(n, d) for n in engines if n not in ("A", "B") for d in ("A", "B") if d in engines]
    for engine in engines:
        times = [g[engine].ttq_s for g in groups if engine in g]
        reached = [t for t in times if t is not None]
        mean = f"{fmean(reached):.1f} s" if reached else "never"
        print(f"  {engine}: {mean} (reached the bar in {len(reached)}/{len(times)} seeds)")
    for num, den in pairs:
        print(ratio(groups, num, den))
    for den in TARGETS:
        line = floor_line(groups, den) if den in engines else None
        if line is not None:
            print(line)
    # One lucky or unlucky seed decides "reached or never" above; the seed-averaged curve
    # asks the same question of each engine's expected quality over time.
    curves = {e: mean_curve([g[e] for g in groups if e in g]) for e in engines}
    finals = {e: fmean(g[e].ref_val for g in groups if e in g) for e in engines}
    seed = fmean(g[engines[0]].referee[0][1] for g in groups)
    bar, note = choose_bar(finals, seed)
    print(f"\n== {setting}: seed-averaged curves, bar {bar:.3f} (means over seeds: {note}) ==")
    ttq = {e: time_to_quality(curve, bar) for e, curve in curves.items()}
    for e in engines:
        runs = [g[e] for g in groups if e in g]
        reached = "never" if ttq[e] is None else f"{ttq[e]:.1f} s"
        print(
            f"  {e}: final ref_val {finals[e]:.3f} ± {_sd([r.ref_val for r in runs]):.3f}, "
            f"test {fmean(r.test for r in runs):.3f} ± {_sd([r.test for r in runs]):.3f} "
            f"(mean ± sd over seeds), depth {fmean(r.depth for r in runs):.1f}, "
            f"wall {fmean(r.wall_s for r in runs):.1f} s, util "
            f"{fmean(r.utilization for r in runs):.2f}, over {max(r.overshoot for r in runs)}, "
            f"reaches the bar at {reached}"
        )
    for num, den in pairs:
        if ttq[num] is not None and ttq[den] is not None:
            print(f"  {num}/{den} time to quality: {ttq[num] / ttq[den]:.2f}")
        else:
            print(f"  {num}/{den} time to quality: n/a ({num if ttq[num] is None else den} never)")
    print(f"\n== {setting}: the candidates each engine admitted, all seeds ==")
    for e in engines:
        print(admitted_line(e, [g[e] for g in groups if e in g]))


def report_saved(path: Path) -> None:
    """The report again, from a --json file: tables and ratios without re-running."""
    runs = [Run(**saved) for saved in json.loads(path.read_text())]
    for run in runs:  # JSON has no tuples
        run.timeline = [(t, c) for t, c in run.timeline]
        run.referee = [(t, score) for t, score in run.referee]
    for setting in dict.fromkeys(r.setting for r in runs):
        groups = []
        for seed in dict.fromkeys(r.seed for r in runs if r.setting == setting):
            group = {r.engine: r for r in runs if r.setting == setting and r.seed == seed}
            report_group(group)
            groups.append(group)
        report_setting(setting, groups)
