"""The judge stage picks its alignment by the annotation's scale."""

import pytest

from flows import stages
from flows.runtime import Runtime
from infra.settings import Settings
from infra.types import Example
from judges.align import AlignedJudge
from judges.pointwise import SEED_JUDGE_PROMPTS, PointwiseJudge
from judges.scaled_align import AlignedScaledJudge
from judges.scaled_metric import ScaledMetric, UnrankedScale
from judges.scales import ScoreScale
from judges.types import JudgedItem
from tests.fakes import ScriptedLM

STARS = ScoreScale("numeric", minimum=1, maximum=5, name="stars")


@pytest.fixture
def rt(tmp_path) -> Runtime:
    runtime = Runtime(Settings(state_dir=tmp_path))
    runtime.__dict__["lm"] = ScriptedLM()
    return runtime


@pytest.fixture
def called(monkeypatch) -> list[tuple]:
    """Which alignment ran, with what: each returns a fixed result."""
    calls = []

    async def boolean(lm, seed, train, val, heldout, config, reflect, on_event=None):
        calls.append(("boolean", seed, len(train), len(val), len(heldout)))
        return AlignedJudge(
            {"rubric": "best"}, 0.42, {"kappa": 0.5}, {"kappa": 0.1}, 0.47, 0.6, 0.3, False, 90
        )

    async def scaled(lm, seed, scale, train, val, heldout, config, reflect, on_event=None):
        calls.append(("scaled", scale, len(train), len(val), len(heldout)))
        return AlignedScaledJudge(
            prompts={"rubric": "best"},
            scale=scale,
            primary="weighted_kappa",
            heldout={"weighted_kappa": 0.5, "spearman": 0.6},
            seed_heldout={"weighted_kappa": 0.1},
            val_score=0.7,
            seed_val_score=0.2,
            kept_seed=False,
            metric_calls=80,
            unparseable=4,
        )

    monkeypatch.setattr(stages, "align_judge", boolean)
    monkeypatch.setattr(stages, "align_scaled_judge", scaled)
    return calls


def items(scale: ScoreScale) -> list[JudgedItem]:
    if scale.kind == "boolean":
        return [
            JudgedItem(f"t{i}", "q", "a", i % 2 == 0, human_value=i % 2 == 0) for i in range(10)
        ]
    return [JudgedItem(f"t{i}", "q", "a", human_value=1.0 + i % 5) for i in range(10)]


async def test_pass_fail_keeps_the_calibrated_threshold_path(rt, called):
    boolean = ScoreScale("boolean", name="correct")
    stage = await stages.align_judge_stage(rt, items(boolean), boolean)
    assert called == [("boolean", dict(SEED_JUDGE_PROMPTS), 4, 2, 4)]
    assert (stage.threshold, stage.seed_threshold) == (0.42, 0.47)
    assert (stage.val_score, stage.seed_val_score, stage.metric_calls) == (0.6, 0.3, 90)
    assert stage.primary == "kappa" and stage.heldout_score == 0.5 and stage.trusted
    assert stage.sizes == {"train": 4, "val": 2, "heldout": 4}
    assert stage.unparseable == 0  # P(yes) is always readable


async def test_a_numeric_scale_aligns_a_judge_that_answers_on_it(rt, called):
    stage = await stages.align_judge_stage(rt, items(STARS), STARS)
    assert [c[:2] for c in called] == [("scaled", STARS)]
    assert stage.scale == STARS and stage.primary == "weighted_kappa"
    assert stage.heldout_score == 0.5 and stage.trusted
    assert (stage.threshold, stage.val_score, stage.seed_val_score) == (0.5, 0.7, 0.2)
    assert stage.unparseable == 4


def test_the_judge_in_use_becomes_the_metric_its_scale_needs(rt):
    boolean = stages.JudgeInUse({"rubric": "r"}, 0.4, {}, 0.5, 0.2, True)
    assert isinstance(stages.judge_of(rt, boolean), PointwiseJudge)
    stars = stages.JudgeInUse({"rubric": "r"}, 0.5, {}, 0.5, 0.2, True, STARS)
    assert isinstance(stages.judge_of(rt, stars), ScaledMetric)
    colours = ScoreScale("categorical", ("red", "blue"), name="colour")
    with pytest.raises(UnrankedScale, match="'colour'"):
        stages.judge_of(rt, stages.JudgeInUse({"rubric": "r"}, 0.5, {}, 0.5, 0.2, True, colours))


async def test_the_prompt_stage_counts_the_judge_verdicts_it_could_not_read(rt):
    """A continuous scale is read from the judge's text: "no idea" scores 0, and is counted."""
    rt.settings.agent_opt.max_metric_calls = 30
    rt.settings.agent_opt.pareto_size = 4
    rt.lm.reply = lambda messages: "no idea"
    percent = ScoreScale("numeric", minimum=0, maximum=100, name="percent")
    judge = stages.JudgeInUse({"rubric": "r"}, 0.5, {}, 0.5, 0.2, True, percent)
    examples = [Example(id=f"e{i}", inputs={"request": f"play song {i}"}) for i in range(8)]
    stage = await stages.optimize_prompts_stage(rt, examples, rt.agent.seed_prompts(), judge)
    assert stage.metric_calls > 0
    assert stage.judge_unparseable == stage.metric_calls  # every verdict was unreadable
