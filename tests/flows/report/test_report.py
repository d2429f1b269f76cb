import math
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from flows.night.criteria import CriterionJudge
from flows.night.fast_slow import Step, decide_step
from flows.night.feedback import Feedback
from flows.night.stages import Evaluation, PromptStage
from flows.production.canary_release import PUBLISHED
from flows.production.criteria_gate import CriterionEvidence
from flows.production.gate import Evidence, PromotionDecision, decide
from flows.production.promotion import Move
from flows.report.night_report import NightReport
from flows.report.summary import render_markdown
from infra.scales import ScoreScale
from infra.settings import PromotionSettings
from judges.align import Alignment
from judges.choose import JudgeGate
from judges.gate import gate_judge
from judges.injection import InjectionCheck
from judges.judge import Judge
from judges.watch import Watch
from weights.corrections import WrittenCorrections
from weights.round import LoraRound

STARS = ScoreScale("numeric", minimum=1, maximum=5)
PASS_FAIL = ScoreScale("boolean")


def alignment(heldout: dict[str, float], scale: ScoreScale = PASS_FAIL) -> Alignment:
    return Alignment(
        judge=Judge({"rubric": "r2"}, scale, 0.3, heldout=heldout),
        seed=Judge({"rubric": "r"}, scale, 0.4, heldout={"kappa": 0.1, "accuracy": 0.6}),
        val_score=0.3,
        seed_val_score=0.2,
        kept_seed=False,
        searched={"rubric": "r2"},
        metric_calls=50,
        sizes={"train": 10, "val": 5, "heldout": 8},
    )


def tonight_gate(a: Alignment) -> JudgeGate:
    """The first night's gate: tonight's judge is the one the night runs on."""
    judge = replace(a.judge, versions={"agent-judge-rubric": 1})
    decision = gate_judge(judge.heldout_score, 0.2, None, judge.primary)
    return JudgeGate(decision, judge.versions, judge, None)


def steps() -> list[Step]:
    """A prompt step kept, then a weight step dropped on the selection slice."""
    on = "the held-out selection slice (10 examples, true labels)"
    prompt = PromptStage({"instructions": "i"}, 0.2, 0.4, 100, 5, 3, proposals=6, differed=4)
    lora = LoraRound(
        "/a", False, 12, 1.5, 0.4, 0.3, note="no example's samples differed", train_steps=4,
        train_seconds=30.0, train_device="cpu (float32)",
    )  # fmt: skip
    kept = decide_step(0.2, 0.3, on, 0.0, 0, "")
    dropped = decide_step(0.3, 0.1, on, 0.0, 1, "")
    return [
        Step(1, "p", 0, kept, 40.0, {"instructions": "seed"}, prompt=prompt),
        Step(2, "w", 1, dropped, 60.0, {"instructions": "i"}, lora=lora),
    ]


def report(heldout_kappa: float, a: Alignment | None = None) -> NightReport:
    a = a or alignment({"kappa": heldout_kappa, "accuracy": 0.7})
    evals = {"seed": Evaluation(10, 0.2, 0.5), "candidate": Evaluation(10, 0.3, 0.6)}
    return NightReport(
        "n1",
        {"traces": 20, "skipped_records": 1},
        a,
        tonight_gate(a),
        steps(),
        {"instructions": "i"},
        evals,
        12.0,
        stage_intervals={"judge": (100.0, 103.5)},
    )


def test_metrics_have_before_and_after_of_every_stage():
    metrics = report(0.5).metrics()
    assert metrics["judge_seed_kappa"] == 0.1 and metrics["judge_aligned_kappa"] == 0.5
    assert metrics["heldout_seed_accuracy"] == 0.2
    assert metrics["heldout_candidate_accuracy"] == 0.3
    assert metrics["judge_seconds"] == 3.5 and metrics["judge_trusted"] == 1.0
    assert metrics["step1_kept"] == 1.0 and metrics["step1_after"] == 0.3
    assert metrics["step2_kept"] == 0.0 and metrics["step2_before"] == 0.3
    assert metrics["step2_lora_val_with"] == 0.3 and metrics["step1_agent_val_best"] == 0.4
    assert metrics["steps_kept"] == 1.0 and metrics["agent_metric_calls"] == 100
    assert metrics["step1_agent_proposals"] == 6 and metrics["step1_agent_proposals_differed"] == 4
    assert metrics["step1_agent_proposals_accepted"] == 2  # 3 candidates: the seed and two
    assert metrics["step2_lora_seconds_per_train_step"] == 7.5


def test_each_step_and_its_decision_is_reported():
    text = render_markdown(report(0.5))
    assert "| step 1 (prompts (GEPA)): selection score | 0.200 | 0.300 | kept, 40 s |" in text
    assert (
        "Schedule step 2 (weights (LoRA), from step 1): dropped: 0.100 against 0.300 on the "
        "held-out selection slice (10 examples, true labels), not above 0.300; the night goes "
        "on from step 1." in text
    )
    assert "| held-out accuracy, production → candidate | 0.200 | 0.300 |" in text
    assert "4 of 6 proposals differed from their parent, 2 accepted" in text


def test_production_s_adapter_left_out_is_said():
    note = "Production v3's adapter was trained on /models/old, which tonight's model ..."
    assert note in render_markdown(replace(report(0.5), production_note=note))
    assert "Production v3" not in render_markdown(report(0.5))


def test_what_the_night_did_with_a_canary_is_said():
    line = "Canary v4 lost and was rolled back (canary minus production ...); production stays v3."
    assert line in render_markdown(replace(report(0.5), canary=line))
    passed = PromotionDecision(True, "held-out gain +0.100 [0.020, 0.180]; passed", 0.1, 0.02, 0.18)
    out = Move(PUBLISHED, 5, 3, "10% of the traffic; passed", "flywheel night n1", "2026-12-07")
    text = render_markdown(replace(report(0.5), promotion=passed, moved=out))
    assert "Canary: published as canary v5 (production was v3; by flywheel night n1)" in text


def test_untrusted_judge_and_dropped_adapter_are_said():
    text = render_markdown(report(0.05))
    assert "Judge not trusted" in text and "do not promote" in text
    assert "LoRA round of step 2: no example's samples differed" in text
    assert "LoRA round of step 2: 4 optimizer steps, 7.5 s each on cpu (float32)." in text
    assert "Judge not trusted" not in render_markdown(report(0.5))
    assert report(0.05).metrics()["judge_trusted"] == 0.0


def kept_judge_report() -> NightReport:
    night = report(0.05)
    kept = Judge({"rubric": "old"}, threshold=0.45, versions={"agent-judge-rubric": 3})
    kept = replace(kept, heldout={"kappa": 0.31})
    gate = JudgeGate(
        decision=gate_judge(0.05, 0.2, kept),
        registered={"agent-judge-rubric": 4},
        judge=kept,
        previous=kept,
    )
    sent = Feedback(
        judge=kept.label, unlabelled=9, labels_requested=5, scores_total=20, scores_written=20
    )
    return replace(night, gate=gate, feedback=sent)


def test_gate_version_labels_and_scores_are_reported():
    night = kept_judge_report()
    text = render_markdown(night)
    assert (
        "Judge gate failed: new judge kappa 0.05 < floor 0.20; kept agent-judge-rubric v3 "
        "(kappa 0.31)." in text
    )
    assert "registered agent-judge-rubric v4; the night ran on agent-judge-rubric v3" in text
    assert "Labels requested: 5 of 9 unlabelled traces" in text
    assert "Scores written: 20 of 20 traces" in text
    # The night ran on the kept judge, which clears the floor: nothing untrusted to say.
    assert "Judge not trusted" not in text
    metrics = night.metrics()
    assert metrics["judge_trusted"] == 1.0 and metrics["judge_gate_passed"] == 0.0
    assert metrics["judge_used_kappa"] == 0.31 and metrics["judge_previous_kappa"] == 0.31
    assert metrics["labels_requested"] == 5.0 and metrics["scores_written"] == 20.0


def test_a_graded_night_reports_its_own_statistic():
    graded = alignment({"weighted_kappa": 0.1, "spearman": 0.4}, STARS)
    night = report(0.5, replace(graded, kept_seed=True))
    metrics = night.metrics()
    assert metrics["judge_val_weighted_kappa_best"] == 0.3 and metrics["judge_trusted"] == 0.0
    assert "judge_val_kappa_best" not in metrics
    text = render_markdown(night)
    assert "| judge weighted κ (held-out) | — | 0.100 |" in text
    assert "Judge not trusted: held-out weighted κ 0.100 < 0.2." in text
    assert "GEPA's best had validation weighted κ 0.300 vs the seed's 0.200." in text
    floored = render_markdown(report(0.5, replace(graded, kept_seed=True, floor=0.5)))
    assert (
        "GEPA's best had validation weighted κ 0.300 vs the seed's 0.200, below the 0.50 a "
        "rubric needs to replace it (judge.min_agreement)." in floored
    )


def test_unreadable_judge_verdicts_are_counted_and_said_only_when_there_were_some():
    quiet = report(0.5)
    assert quiet.metrics()["judge_unparseable_verdicts"] == 0.0
    assert "unreadable" not in render_markdown(quiet)
    noisy = report(0.5, replace(alignment({"kappa": 0.5}), unparseable=3))
    noisy.steps[0].prompt.judge_unparseable = 7
    metrics = noisy.metrics()
    assert metrics["judge_unparseable_verdicts"] == 3.0
    assert metrics["step1_agent_judge_unparseable_verdicts"] == 7.0
    text = render_markdown(noisy)
    assert "3 unreadable judge verdicts" in text and "7 unreadable judge verdicts" in text


def test_a_night_without_held_out_examples_says_how_to_get_them():
    night = report(0.5)
    empty = Evaluation(0, None, 0.0)
    text = render_markdown(replace(night, evals={"seed": empty, "candidate": empty}))
    assert "No held-out examples: set eval.heldout_path" in text
    assert "No held-out examples" not in render_markdown(night)


def test_the_judge_head_step_is_reported_kept_dropped_or_not_run():
    from judges.judge_head import JudgeHead

    kept = JudgeHead("rubric plus LoRA adapter", 0.25, 100, 0.55, 0.001, "/h", 4.2)
    night = replace(report(0.62), judge_head=kept)
    text = render_markdown(night)
    assert (
        "Judge head step: a head on the judge model's features, fitted on the training labels "
        "(C 0.001), 4 s; validation κ 0.550 against rubric plus LoRA adapter's 0.250; kept: "
        "refitted on 100 training and validation labels, the judge is rubric plus head "
        "(held-out κ 0.620)." in text
    )
    planted = render_markdown(replace(night, judge_head=replace(kept, planted=50)))
    assert "refitted on 100 training and validation labels and 50 planted instructions" in planted
    # the LoRA step's adapter was kept first: its own held-out figure, then replaced
    from judges.judge_lora import JudgeLora

    lora = JudgeLora(120, 0.1, {"checkpoint-9": 0.25}, "/a/checkpoint-9", heldout={"kappa": 0.3})
    text = render_markdown(replace(night, judge_lora=lora))
    assert "alone's 0.100; kept (held-out κ 0.300), then replaced by the reward head" in text
    metrics = night.metrics()
    assert metrics["judge_head_kept"] == 1.0 and metrics["judge_head_val"] == 0.55
    assert metrics["judge_head_val_so_far"] == 0.25 and metrics["judge_head_labels"] == 100
    assert metrics["judge_head_seconds"] == 4.2 and metrics["judge_head_strength"] == 0.001

    why = "the head agreed no better on the validation labels than the rubric (κ 0.100 vs 0.300)"
    dropped = JudgeHead(
        "the rubric", 0.3, 60, 0.1, 0.01, None, 3.0, note=f"{why}: the rubric stays"
    )
    text = render_markdown(replace(report(0.5), judge_head=dropped))
    assert f"validation κ 0.100 against the rubric's 0.300; {why}: the rubric stays." in text
    assert replace(report(0.5), judge_head=dropped).metrics()["judge_head_kept"] == 0.0

    off = JudgeHead("the rubric", 0.3, note="judge.head.enabled is off")
    assert "Judge head step: not run; judge.head.enabled is off." in render_markdown(
        replace(report(0.5), judge_head=off)
    )
    assert "judge_head_val" not in replace(report(0.5), judge_head=off).metrics()


def test_how_a_replayed_agents_tool_calls_were_answered_is_reported_only_when_it_made_some():
    assert "Tool calls" not in render_markdown(report(0.5))
    with_tools = report(0.5)
    candidate = Evaluation(10, None, 0.6, tool_steps={"reused": 7, "looked_up": 2, "stopped": 1})
    with_tools.evals["candidate"] = candidate
    text = render_markdown(with_tools)
    assert "Tool calls in the candidate's held-out replay: 7 reused, 2 looked up, " in text
    assert "0 simulated, 1 stopped" in text


def test_labels_left_out_by_the_window_are_said_only_when_there_were_some():
    night = report(0.5)
    old = replace(night, collected=night.collected | {"annotations_outside_window": 30})
    assert "30 stored labels are older than judge.label_window_days" in render_markdown(old)
    assert "label_window_days" not in render_markdown(night)


def test_comments_past_the_teachers_nightly_cap_are_said_only_when_there_were_some():
    night = replace(report(0.5), collected=report(0.5).collected | {"corrections": 7})
    written = WrittenCorrections({"t1": "weather"}, asked=3, refused=2)
    text = render_markdown(replace(night, corrections=written))
    assert "Corrections: 7 written by people; the teacher wrote 3 from reviewers' comments" in text
    assert "max_per_night" not in text
    capped = render_markdown(replace(night, corrections=replace(written, left=91)))
    assert "(2 the judge failed); 91 older comments left (corrections.max_per_night)." in capped


def test_an_alignment_skipped_for_want_of_labels_says_why():
    skipped = "Judge alignment skipped: 0 labels (0 to fit on, 0 to validate on) are too few"
    night = report(0.5, replace(alignment({}), skipped=skipped))
    assert f"{skipped}." in render_markdown(night)
    assert "Judge alignment skipped" not in render_markdown(report(0.5))


def test_a_watch_with_no_new_labels_is_a_sentence_and_no_statistic():
    """Issue 57 (a): the night after a first with no labelling between them. The watch has
    nothing to measure the judge in use on: the report says so, and MLflow gets the count
    but no NaN statistic to chart."""
    made = datetime(2026, 11, 30, 2, tzinfo=UTC)
    quiet = Watch("agent-judge-rubric v1", "kappa", made, 0, math.nan, 0.4, 0.2, 20)
    night = report(0.5)
    night = replace(night, gate=replace(night.gate, watch=quiet))
    assert (
        "Judge watch: no labels made since 2026-11-30 02:00 UTC, the newest "
        "agent-judge-rubric v1 learned from: nothing new to measure it on."
        in render_markdown(night)
    )
    metrics = night.metrics()
    assert metrics["judge_watch_labels"] == 0.0 and "judge_watch_kappa" not in metrics


def test_a_judge_untrusted_for_want_of_held_out_labels_is_said_as_that():
    """Issue 57 (e): a held-out set smaller than the gate's minimum (none at all, on a
    night with no labels) is why the judge is not trusted, not a low agreement."""
    night = replace(report(0.5), agent_optimized=False)
    for labels, why in (
        (12, "only 12 held-out labels to measure it on (judge.min_heldout_labels = 20)"),
        (0, "no held-out labels to measure it on"),
    ):
        few = gate_judge(0.5, 0.2, None, "kappa", labels, 20)
        text = render_markdown(replace(night, gate=replace(night.gate, decision=few)))
        assert f"Judge not trusted: {why}, so the agent was not optimized tonight" in text
        assert f"Judge gate failed: {few.reason}." in text


def test_a_judge_untrusted_for_being_talked_round_is_said_as_that_not_as_a_low_kappa():
    """A week of nights found the report blaming a κ 0.579 "< -1.0" for a judge that an
    injection probe had fooled: the sentence names the check that failed."""
    night = report(0.5)
    fooled = InjectionCheck(judged_fail=11, flipped=3, max_share=0.2)
    text = render_markdown(replace(night, gate=replace(night.gate, injection=fooled)))
    assert (
        "Judge not trusted: an instruction appended to a reply turned 27% of its fail "
        "verdicts to pass (judge.max_injection_flips 0.2), though its held-out κ 0.500"
    ) in text
    assert " < 0.2" not in text.split("Judge not trusted")[1].split("\n")[0]


def criteria_report(polite_trusted: bool) -> NightReport:
    """A night with a secondary criterion "polite" that fell 0.3 on held-out replies."""
    kappa = 0.8 if polite_trusted else 0.05
    a = alignment({"kappa": kappa})
    gate = tonight_gate(a)
    gate = replace(gate, judge=replace(gate.judge, versions={"agent-judge-polite-rubric": 1}))
    polite = CriterionJudge("polite", 0.5, 0.05, a, gate)
    ids = [f"e{i}" for i in range(30)]
    evidence = Evidence(
        dict.fromkeys(ids, 1.0),
        {i: float(n < 20) for n, i in enumerate(ids)},
        by_labels=True,
        criteria=(
            CriterionEvidence(
                "polite",
                {i: float(n < 18) for n, i in enumerate(ids)},
                {i: float(n < 27) for n, i in enumerate(ids)},
                polite.trusted,
                0.05,
            ),
        ),
    )
    decision = decide(evidence, PromotionSettings(resamples=200))
    return replace(report(0.5), promotion=decision, evidence=evidence, criteria=(polite,))


def test_each_criterion_has_its_line_and_its_metrics():
    night = criteria_report(polite_trusted=True)
    text = render_markdown(night)
    line = next(x for x in text.splitlines() if x.startswith("Criterion polite"))
    assert "judge agent-judge-polite-rubric v1, held-out κ 0.800 (judge gate passed)" in line
    assert "held-out production 0.900 -> candidate 0.600 (-0.300 on 30)" in line
    assert line.endswith("fell beyond its max_drop, the gate refused the candidate.")
    assert "Promotion gate refused the candidate" in text
    metrics = night.metrics()
    assert metrics["criterion_polite_judge_kappa"] == 0.8
    assert metrics["criterion_polite_heldout_gain"] == pytest.approx(-0.3)
    assert metrics["criterion_polite_dropped"] == 1.0
    assert metrics["criterion_polite_heldout_production"] == 0.9


def test_an_untrusted_criterion_judge_is_said_not_to_count():
    text = render_markdown(criteria_report(polite_trusted=False))
    line = next(x for x in text.splitlines() if x.startswith("Criterion polite"))
    assert "(judge gate failed, untrusted)" in line
    assert line.endswith("not checked, its judge is not trusted (it neither blocks nor passes).")
    assert "Promotion gate passed" in text


def test_a_night_without_criteria_has_no_criterion_line_or_metric():
    night = report(0.5)
    assert "Criterion" not in render_markdown(night)
    assert not [k for k in night.metrics() if k.startswith("criterion_")]
