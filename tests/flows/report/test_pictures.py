"""The night's pictures, drawn from a small recorded night: each one there when the night
has its data, with the parts a person reads, renderable to PNG, and None without data."""

from dataclasses import replace
from datetime import datetime, timedelta
from io import BytesIO
from pathlib import Path

import numpy as np
import pytest
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from flows.production.gate import Evidence, decide, paired_gain
from flows.report.night_report import NightReport
from flows.report.pictures import NightPoint, gate, gepa, judge, night_pictures, timeline, trend
from flows.report.progress import StageProgress
from gepa_opt import (
    BudgetUsed,
    FrontierChanged,
    GEPAConfig,
    MergeTried,
    PoolEntry,
    ProposalAccepted,
)
from infra.scales import ScoreScale
from infra.settings import PromotionSettings
from judges.judge import Judge
from judges.types import HeldoutVerdict
from tests.flows.report.test_report import report
from tests.gepa_opt.test_engine import run_keyword_task

GATE = PromotionSettings(resamples=200)
# slice -> (examples, candidate's passes, production's passes): music falls by 0.5
SLICES = {"weather": (10, 9, 5), "music": (8, 3, 7), "timer": (3, 3, 1)}
# the judge's P(pass) on ten held-out labels, and people's label
HELDOUT = [(0.9, True), (0.8, True), (0.7, True), (0.35, True), (0.6, False)]
HELDOUT += [(0.2, False), (0.1, False), (0.3, False), (0.75, True), (0.05, False)]
# the judge's GEPA pool: the winner (3) came from 1, from the seed; 2 is a side branch
JUDGE_POOL = (
    PoolEntry((), 0.40, 10),
    PoolEntry((0,), 0.50, 30),
    PoolEntry((0,), 0.45, 50),
    PoolEntry((1,), 0.62, 80),
    PoolEntry((2,), 0.55, 95),
)
# the prompt step's: a merge of 1 and 2 wins
AGENT_POOL = (
    PoolEntry((), 0.30, 20),
    PoolEntry((0,), 0.42, 45),
    PoolEntry((0,), 0.38, 60),
    PoolEntry((1, 2), 0.51, 90),
)
STARTED = datetime(2026, 12, 1, 2, 0)


def evidence() -> Evidence:
    candidate, production, slices = {}, {}, {}
    for name, (n, new, old) in SLICES.items():
        for i in range(n):
            key = f"{name}-{i}"
            candidate[key], production[key] = float(i < new), float(i < old)
            slices[key] = name
    return Evidence(candidate, production, slices, by_labels=True, production_version=3)


def night_judge() -> Judge:
    verdicts = tuple(
        HeldoutVerdict(f"h{i}", human, p >= 0.5, p, float(human))
        for i, (p, human) in enumerate(HELDOUT)
    )
    return Judge(
        {"rubric": "r2"},
        threshold=0.5,
        versions={"agent-judge-rubric": 4},
        heldout={"kappa": 0.6},
        heldout_verdicts=verdicts,
    )


def history() -> list[NightPoint]:
    def night(day: int, prod, cand, kappa, event=None, version=None) -> NightPoint:
        started = STARTED + timedelta(days=day)
        return NightPoint(f"n{day}", started, prod, cand, kappa, "kappa", event, version)

    return [
        night(0, 0.50, 0.55, 0.40, "promoted", 2),
        night(1, 0.55, 0.52, 0.45, "refused", 3),
        night(2, 0.55, None, None),  # no held-out examples, no judge measured
        night(3, 0.55, 0.61, 0.58, "promoted", 3),
        night(4, 0.50, 0.50, 0.60, "rolled back", 2),
        night(5, 0.50, 0.60, 0.60),
    ]


def recorded_night() -> NightReport:
    """`test_report`'s night with what the pictures draw: the gate's evidence and
    decision, the judge's held-out verdicts, both GEPA pools, the stages' clock."""
    night = report(0.6)
    found = evidence()
    night.steps[0].prompt.pool = AGENT_POOL
    night.steps[0].prompt.metric_calls = 100
    alignment = replace(night.alignment, pool=JUDGE_POOL, metric_calls=120)
    return replace(
        night,
        run_id="n5",
        alignment=alignment,
        gate=replace(night.gate, judge=night_judge()),
        evidence=found,
        promotion=decide(found, GATE, seed=0),
        stage_intervals={
            "collect": (0.0, 20.0),
            "judge": (20.0, 400.0),
            "judge_gate": (400.0, 460.0),
            "step1_prompts": (470.0, 2300.0),
            "step2_lora": (2300.0, 3500.0),
            "register": (3520.0, 3560.0),
        },
        seconds=3600.0,
    )


def png(figure: Figure) -> bytes:
    out = BytesIO()
    figure.savefig(out, format="png")
    return out.getvalue()


def test_the_gate_has_a_bar_per_slice_and_one_for_all_with_the_gate_s_intervals():
    night = recorded_night()
    figure = gate.figure(night.evidence, night.promotion, GATE)
    (axis,) = figure.axes
    bars = [p for p in axis.patches if isinstance(p, Rectangle)]
    assert len(bars) == len(SLICES) + 1
    labels = [t.get_text() for t in axis.get_yticklabels()]
    assert labels == [
        "all held-out examples (n=21)",
        "music (n=8)",
        "timer (n=3)",
        "weather (n=10)",
    ]
    drawn = gate.bars(night.evidence, night.promotion, GATE)
    assert (drawn[0].gain, drawn[0].low) == (night.promotion.gain, night.promotion.low)
    music = paired_gain([float(i < 3) for i in range(8)], [float(i < 7) for i in range(8)], GATE)
    assert (drawn[1].gain, drawn[1].low, drawn[1].high) == (music.value, music.low, music.high)
    assert drawn[1].colour == gate.VERMILLION  # it fell beyond the allowed drop
    assert drawn[2].hatch == "//"  # three examples: too few for the gate to check
    vertical = {tuple(line.get_xdata()) for line in axis.lines if len(line.get_xdata()) == 2}
    assert (0.0, 0.0) in vertical and (-0.1, -0.1) in vertical  # zero, max_slice_drop
    assert "refused" in figure.get_suptitle() and "music -0.500" in axis.get_title()
    assert png(figure)
    assert gate.figure(None, None) is None


def test_the_judge_counts_each_held_out_label_once_beside_its_verdict():
    night = recorded_night()
    figure = judge.figure(night.gate.judge, history(), "n5")
    matrix, calibration, agreement = figure.axes
    counts = matrix.images[0].get_array()
    # rows people (pass, fail), columns the judge: 4 + 1 passes, 1 + 4 fails
    assert counts.tolist() == [[4, 1], [1, 4]]
    assert counts.sum() == len(HELDOUT)
    assert [t.get_text() for t in matrix.get_xticklabels()] == ["pass", "fail"]
    assert matrix.get_ylabel() == "people said"
    scores, shares, _ = zip(*judge.calibration(night.gate.judge.heldout_verdicts), strict=True)
    # P(pass) in [0, 0.2), [0.2, 0.4), [0.6, 0.8), [0.8, 1]; none in [0.4, 0.6)
    assert shares == (0.0, 1 / 3, 2 / 3, 1.0) and scores[0] == pytest.approx(0.075)
    line = next(line for line in calibration.lines if line.get_label().startswith("the judge"))
    assert tuple(line.get_ydata()) == shares
    nights = [p.judge_agreement for p in history() if p.judge_agreement is not None]
    assert list(agreement.lines[0].get_ydata()) == nights
    assert png(figure)
    assert judge.figure(replace(night.gate.judge, heldout_verdicts=())) is None


def test_a_judge_on_categories_has_a_row_and_column_per_category():
    scale = ScoreScale("categorical", categories=("wrong", "partly", "right"))
    said = [("wrong", "wrong"), ("partly", "right"), ("right", "right"), ("right", "partly")]
    verdicts = tuple(HeldoutVerdict(f"h{i}", h, j) for i, (h, j) in enumerate(said))
    figure = judge.figure(Judge({"rubric": "r"}, scale, heldout_verdicts=verdicts))
    (matrix,) = figure.axes  # no scores to calibrate, no nights
    assert matrix.images[0].get_array().tolist() == [[1, 0, 0], [0, 0, 1], [0, 1, 1]]
    assert png(figure)


def test_gepa_draws_every_candidate_the_front_and_the_winner_s_lineage():
    night = recorded_night()
    figure = gepa.figure(night)
    aligned, step = figure.axes
    assert aligned.get_title() == "judge rubric (alignment): 5 candidates"
    assert step.get_title() == "agent prompts, step 1: 4 candidates"
    for axis, pool, ancestry in (
        (aligned, JUDGE_POOL, [0, 1, 3]),
        (step, AGENT_POOL, [0, 1, 2, 3]),
    ):
        (candidates,) = [c for c in axis.collections if c.get_label() == "a candidate"]
        assert len(candidates.get_offsets()) == len(pool)
        (lineage,) = [c for c in axis.collections if c.get_gid() == "lineage"]
        assert gepa.ancestry(pool, gepa.winner(pool)) == ancestry
        points = [(pool[k].found_at, pool[k].val_score) for k in ancestry]
        assert np.asarray(lineage.get_offsets()).tolist() == [list(p) for p in points]
    (front,) = [line for line in aligned.lines if line.get_label() == "best so far"]
    # the best so far rises at 10, 30 and 80 metric calls, then holds to the 120 spent
    assert list(front.get_xdata()) == [10, 30, 80, 120]
    assert list(front.get_ydata()) == [0.40, 0.50, 0.62, 0.62]
    assert png(figure)


def test_gepa_draws_a_curve_alone_and_nothing_without_a_search():
    night = report(0.5)  # no pools: a night from before they were kept
    assert gepa.figure(night) is None  # and no curves either
    night.steps[0].prompt.curve = [(10, 0.2), (40, 0.35)]
    (axis,) = gepa.figure(night).axes
    (front,) = axis.lines
    assert list(front.get_ydata()) == [0.2, 0.35, 0.35]


def test_the_trend_marks_each_promotion_and_rollback_and_gaps_missing_nights():
    figure = trend.figure(history())
    scores, agreement = figure.axes
    production = next(line for line in scores.lines if line.get_label() == "production")
    assert list(production.get_ydata()) == [p.production_heldout for p in history()]
    candidate = next(line for line in scores.lines if line.get_label() == "the night's candidate")
    assert np.isnan(candidate.get_ydata()[2])  # a gap where the night had none
    markers = {
        c.get_paths()[0].vertices.tobytes(): len(c.get_offsets()) for c in scores.collections
    }
    assert sorted(markers.values()) == [1, 1, 2]  # refused, rolled back, promoted twice
    versions = sorted(t.get_text() for t in scores.texts)
    assert versions == ["v2", "v2", "v3", "v3"]
    events = [line for line in scores.lines if line.get_label().startswith("_")]
    assert len(events) >= 3  # a line across the panel per promotion and rollback
    assert agreement.get_ylabel() == "held-out kappa"
    assert png(figure)


def test_the_trend_draws_one_night_and_nothing_for_none():
    (only,) = history()[:1]
    figure = trend.figure([only])
    assert list(figure.axes[0].lines[0].get_ydata()) == [0.5]
    assert png(figure)
    assert trend.figure([]) is None


def test_the_time_has_a_bar_per_stage_in_order_and_the_wall_time_in_the_title():
    night = recorded_night()
    figure = timeline.figure(night.stage_intervals, night.seconds)
    (axis,) = figure.axes
    bars = [p for p in axis.patches if isinstance(p, Rectangle)]
    assert len(bars) == len(night.stage_intervals)
    labels = [t.get_text() for t in axis.get_yticklabels()]
    assert labels == list(night.stage_intervals)  # the first stage on top
    assert "60.0 min wall time" in axis.get_title()
    assert axis.get_xlabel().endswith("(min)")
    longest = max(bars, key=lambda b: b.get_width())
    assert longest.get_x() == pytest.approx(470 / 60) and longest.get_width() == pytest.approx(30.5)
    assert png(figure)
    assert timeline.figure({}) is None


def test_night_pictures_names_each_picture_that_has_data():
    pictures = night_pictures(recorded_night(), history(), GATE)
    assert set(pictures) == {"gate.png", "judge.png", "gepa.png", "trend.png", "time.png"}
    for picture in pictures.values():
        assert png(picture)[:8] == b"\x89PNG\r\n\x1a\n"
    bare = replace(report(0.5), stage_intervals={})
    assert night_pictures(bare, []) == {}


def test_the_progress_dates_each_candidate_when_it_joined_the_pool():
    progress = StageProgress("test", None)
    progress.on_event(BudgetUsed(0, 5, 0, 5, 100, 0))
    progress.on_event(FrontierChanged(0, 0, 0.3, 0.3, (0,), 1))  # the seed, alone
    progress.on_event(BudgetUsed(1, 12, 1, 17, 100, 1))
    progress.on_event(ProposalAccepted(1, 0, 1, ("rubric",), 1.0, 2.0, 0.5))
    progress.on_event(FrontierChanged(1, 1, 0.5, 0.5, (1,), 2))
    progress.on_event(BudgetUsed(2, 8, 0, 25, 100, 1))
    progress.on_event(MergeTried(2, 0, 1, 0, 2.0, 1.5, 2))
    progress.on_event(MergeTried(3, 0, 1, 0, 1.0, 1.5, None))  # refused: no candidate
    pool = (PoolEntry((), 0.3), PoolEntry((0,), 0.5), PoolEntry((0, 1), 0.45))
    assert [e.found_at for e in progress.dated(pool)] == [5, 17, 25]
    assert [e.found_at for e in StageProgress("resumed", None).dated(pool)] == [None] * 3


async def test_a_real_search_s_candidates_are_dated_in_the_order_they_joined():
    events: list = []
    result, _ = await run_keyword_task(GEPAConfig(max_metric_calls=150, seed=1), events)
    progress = StageProgress("keyword task", None)
    for event in events:
        progress.on_event(event)
    dated = progress.dated(result.pool())
    calls = [e.found_at for e in dated]
    assert None not in calls and calls == sorted(calls) and calls[-1] <= result.metric_calls_used
    assert calls[0] >= 6  # the seed, after its pass over the 6 validation examples


def test_all_five_render_for_a_person_to_look_at(tmp_path: Path):
    """What `night_pictures` gives, saved as the files a person opens."""
    for name, picture in night_pictures(recorded_night(), history(), GATE).items():
        picture.savefig(tmp_path / name)
        assert (tmp_path / name).stat().st_size > 10_000
