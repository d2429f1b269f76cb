from flows.report import NightReport, render_markdown
from flows.stages import Evaluation, JudgeStage, LoraStage, PromptStage


def report(heldout_kappa: float) -> NightReport:
    judge = JudgeStage(
        prompts={"rubric": "r2"},
        threshold=0.3,
        heldout={"kappa": heldout_kappa, "accuracy": 0.7},
        seed_prompts={"rubric": "r"},
        seed_threshold=0.4,
        seed_heldout={"kappa": 0.1, "accuracy": 0.6},
        val_score=0.3,
        seed_val_score=0.2,
        kept_seed=False,
        metric_calls=50,
        sizes={"train": 10, "val": 5, "heldout": 8},
        floor=0.2,
    )
    prompt = PromptStage({"instructions": "i"}, 0.2, 0.4, 100, 5, 3)
    lora = LoraStage(
        "/a", False, 12, 1.5, 0.4, 0.3, note="not kept: the judge preferred the base model"
    )
    evals = {
        "seed": Evaluation(10, 0.2, 0.5),
        "prompts": Evaluation(10, 0.3, 0.6),
        "lora": Evaluation(10, 0.1, 0.4),
    }
    return NightReport(
        "n1",
        {"traces": 20, "skipped_records": 1},
        judge,
        prompt,
        lora,
        evals,
        12.0,
        stage_intervals={"judge": (100.0, 103.5)},
    )


def test_metrics_have_before_and_after_of_every_stage():
    metrics = report(0.5).metrics()
    assert metrics["judge_seed_kappa"] == 0.1 and metrics["judge_aligned_kappa"] == 0.5
    assert metrics["heldout_seed_accuracy"] == 0.2 and metrics["heldout_lora_accuracy"] == 0.1
    assert metrics["judge_seconds"] == 3.5 and metrics["judge_trusted"] == 1.0
    assert metrics["lora_val_with"] == 0.3


def test_untrusted_judge_and_dropped_adapter_are_said():
    text = render_markdown(report(0.05))
    assert "Judge not trusted" in text and "do not promote" in text
    assert "not kept" in text
    assert "Judge not trusted" not in render_markdown(report(0.5))
    assert report(0.05).metrics()["judge_trusted"] == 0.0


def kept_judge_report() -> NightReport:
    from flows.feedback import Feedback
    from flows.judge_gate import JudgeGate
    from flows.judge_in_use import JudgeInUse
    from judges.gate import InUseJudge, gate_judge

    night = report(0.05)
    kept = JudgeInUse({"rubric": "old"}, 0.45, {"agent-judge-rubric": 3}, 0.31, 0.2, False)
    night.gate = JudgeGate(
        decision=gate_judge(0.05, 0.2, InUseJudge(kept.label, kept.heldout_score)),
        registered={"agent-judge-rubric": 4},
        judge=kept,
        previous=kept,
    )
    night.feedback = Feedback(
        judge=kept.label, unlabelled=9, labels_requested=5, scores_total=20, scores_written=20
    )
    return night


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
    from judges.scales import ScoreScale

    night = report(0.5)
    night.judge.scale = ScoreScale("numeric", minimum=1, maximum=5)
    night.judge.heldout = {"weighted_kappa": 0.1, "spearman": 0.4}
    night.judge.kept_seed = True
    metrics = night.metrics()
    assert metrics["judge_val_weighted_kappa_best"] == 0.3 and metrics["judge_trusted"] == 0.0
    assert "judge_val_kappa_best" not in metrics
    text = render_markdown(night)
    assert "| judge weighted κ (held-out) | — | 0.100 |" in text
    assert "Judge not trusted: held-out weighted κ 0.100 < 0.2." in text
    assert "GEPA's best had validation weighted κ 0.300 vs the seed's 0.200" in text


def test_unreadable_judge_verdicts_are_counted_and_said_only_when_there_were_some():
    quiet = report(0.5)
    assert quiet.metrics()["judge_unparseable_verdicts"] == 0.0
    assert "unreadable" not in render_markdown(quiet)
    noisy = report(0.5)
    noisy.judge.unparseable, noisy.prompt.judge_unparseable = 3, 7
    metrics = noisy.metrics()
    assert metrics["judge_unparseable_verdicts"] == 3.0
    assert metrics["agent_judge_unparseable_verdicts"] == 7.0
    text = render_markdown(noisy)
    assert "3 unreadable judge verdicts" in text and "7 unreadable judge verdicts" in text
