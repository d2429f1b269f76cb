import math
import pickle

import pytest

from gepa_opt import GEPAConfig
from infra.scales import ScoreScale
from judges.align import Alignment, align
from judges.judge import Judge
from judges.pass_fail_fit import label_weights
from judges.pointwise import PointwiseJudge
from judges.types import JudgedItem
from tests.fakes import ScriptedLM

PASS_FAIL = ScoreScale("boolean")


def judged(n: int) -> list[JudgedItem]:
    # Passing replies say "right", failing ones say "wrong"; humans agree with that.
    return [
        JudgedItem(
            f"t{i}",
            f"request {i}",
            "right" if i % 3 == 0 else "wrong",
            human_pass=i % 3 == 0,
            human_comment="fine" if i % 3 == 0 else "wrong intent",
        )
        for i in range(n)
    ]


def p_yes(messages):
    rubric, user = messages[0]["content"], messages[1]["content"]
    if "must name the intent" not in rubric:
        return 0.3  # the seed rubric carries no signal
    return 0.8 if "<reply>\nright" in user else 0.2


async def test_alignment_finds_a_rubric_that_agrees_with_humans():
    lm = ScriptedLM(
        reply=lambda m: "```\nA reply passes only if it must name the intent.\n```", p_first=p_yes
    )
    items = judged(30)
    train, val, heldout = items[:12], items[12:21], items[21:]

    async def reflect(prompt: str) -> str:
        assert "wrong intent" in prompt  # the human comment reaches the reflection
        assert "The judge's reason:" in prompt  # beside the judge's own reason
        return (await lm.complete([{"role": "user", "content": prompt}])).text

    aligned = await align(
        lm,
        {"rubric": "Judge the reply."},
        PASS_FAIL,
        train,
        val,
        heldout,
        GEPAConfig(max_metric_calls=60, reflection_minibatch_size=4, skip_perfect_score=False),
        reflect,
    )
    assert "must name the intent" in aligned.judge.prompts["rubric"]
    assert aligned.judge.heldout["kappa"] == 1.0
    assert abs(aligned.seed.heldout["kappa"]) < 1e-9
    assert 0.2 < aligned.judge.threshold <= 0.8
    assert aligned.metric_calls <= 60
    assert aligned.sizes == {"train": 12, "val": 9, "heldout": 9} and aligned.unparseable == 0
    # each held-out label beside the verdict its agreement counted, for the report's picture
    verdicts = aligned.judge.heldout_verdicts
    assert [v.id for v in verdicts] == [i.id for i in heldout]
    assert all(v.judged == v.human == i.human_pass for v, i in zip(verdicts, heldout, strict=True))
    assert {(v.score, v.human_score) for v in verdicts} == {(0.8, 1.0), (0.2, 0.0)}
    assert {v.score for v in aligned.seed.heldout_verdicts} == {0.3}  # the seed's own
    # GEPA's pool: the seed first, every other candidate from one in the pool before it
    assert aligned.pool[0].parents == () and len(aligned.pool) >= 2
    assert all(0 <= p < k for k, e in enumerate(aligned.pool) for p in e.parents)
    assert max(e.val_score for e in aligned.pool) > aligned.pool[0].val_score  # it improved


def test_a_result_pickled_before_the_pictures_fields_loads_with_their_defaults():
    """Prefect pickles a stage's result; a night resumed across this change reads one
    without the held-out verdicts or GEPA's pool, and finds them empty."""
    judge = Judge({"rubric": "r"}, heldout={"kappa": 0.5})
    old = Alignment(judge, judge, 0.3, 0.2, False, {"rubric": "r"}, 10, {"heldout": 0})
    del old.__dict__["pool"]
    object.__delattr__(judge, "heldout_verdicts")
    assert "heldout_verdicts" not in judge.__dict__
    loaded = pickle.loads(pickle.dumps(old))
    assert loaded.pool == () and loaded.judge.heldout_verdicts == ()
    assert loaded.judge.heldout == {"kappa": 0.5}


def test_label_weights_balance_the_classes():
    weights = label_weights(judged(30))  # 10 pass, 20 fail
    assert weights == {True: 1.0, False: 0.5}


async def test_pointwise_judge_reads_probabilities():
    judge = PointwiseJudge(ScriptedLM(p_first=lambda m: 0.3), {"rubric": "r"}, threshold=0.25)
    verdict = await judge.verdict(JudgedItem("t", "in", "out"))
    assert abs(verdict.p_pass - 0.3) < 1e-9 and verdict.passed


async def align_thirds(lm: ScriptedLM, items: list[JudgedItem], **kwargs):
    """Align from "Judge the reply." on 36 items split into thirds, `lm` also reflecting."""

    async def reflect(prompt: str) -> str:
        return (await lm.complete([{"role": "user", "content": prompt}])).text

    return await align(
        lm,
        {"rubric": "Judge the reply."},
        PASS_FAIL,
        items[:12],
        items[12:24],
        items[24:],
        GEPAConfig(max_metric_calls=60, reflection_minibatch_size=4, skip_perfect_score=False),
        reflect,
        **kwargs,
    )


async def test_a_rubric_that_games_the_surrogate_does_not_replace_the_seed():
    items = judged(36)

    def p_yes_gamed(messages):
        rubric, user = messages[0]["content"], messages[1]["content"]
        passes = "<reply>\nright" in user
        if "be very sure" in rubric:  # confident on most items, no signal on the rest
            special = int(user.split("request ")[1].split("\n")[0]) % 4 != 0
            return (0.99 if passes else 0.01) if special else 0.5
        return 0.45 if passes else 0.40  # weak but perfectly ranked

    lm = ScriptedLM(reply=lambda m: "```\nJudge and be very sure.\n```", p_first=p_yes_gamed)
    aligned = await align_thirds(lm, items)
    assert "be very sure" in aligned.searched["rubric"]  # the search took it
    assert aligned.kept_seed and aligned.judge.prompts == {"rubric": "Judge the reply."}
    assert aligned.seed_val_score == 1.0 and aligned.val_score < 1.0
    assert aligned.judge == aligned.seed


async def test_a_pass_fail_label_missing_is_named_before_any_budget_is_spent():
    lm = ScriptedLM(p_first=p_yes)
    items = judged(12)
    unlabelled = JudgedItem("t99", "request", "right")
    with pytest.raises(ValueError, match="t99"):
        await align(
            lm,
            {"rubric": "r"},
            PASS_FAIL,
            items[:6],
            items[6:] + [unlabelled],
            [],
            GEPAConfig(max_metric_calls=10),
            lambda prompt: None,
        )
    assert lm.calls == []


async def test_a_rubric_below_the_floor_does_not_replace_the_seed_even_when_it_beats_it():
    def p_yes_weak(messages):
        rubric, user = messages[0]["content"], messages[1]["content"]
        if "must name the intent" not in rubric:
            return 0.3  # the seed: no signal, kappa 0
        number = int(user.split("request ")[1].split("\n")[0])
        passes = ("<reply>\nright" in user) != (number % 4 == 1)  # wrong on a quarter
        return 0.8 if passes else 0.2

    async def aligned_with(floor: float):
        lm = ScriptedLM(
            reply=lambda m: "```\nA reply passes only if it must name the intent.\n```",
            p_first=p_yes_weak,
        )
        return await align_thirds(lm, judged(36), floor=floor)

    free = await aligned_with(float("-inf"))
    assert not free.kept_seed and "must name the intent" in free.judge.prompts["rubric"]
    assert free.seed_val_score < free.val_score < 0.9  # better than the seed, not good
    floored = await aligned_with(0.9)
    assert floored.val_score == free.val_score  # the same search, the same best
    assert floored.kept_seed and floored.judge == floored.seed and floored.floor == 0.9


async def test_no_search_fits_and_measures_the_seed_rubric_reading_each_prompt_once():
    lm = ScriptedLM(p_first=lambda m: 0.8 if "<reply>\nright" in m[1]["content"] else 0.2)
    items = judged(30)

    async def reflect(prompt: str) -> str:
        raise AssertionError("no search, no reflection")

    seed = {"rubric": "Judge the reply."}
    aligned = await align(lm, seed, PASS_FAIL, items[:12], items[12:21], items[21:], None, reflect)
    assert aligned.judge.prompts == seed and not aligned.kept_seed and aligned.metric_calls == 0
    assert aligned.judge.heldout["kappa"] == 1.0 == aligned.seed.heldout["kappa"]
    # the cut fitted on train and val once, held-out measured once: no prompt read twice
    read = [m[1]["content"] for m in lm.choice_calls]
    assert len(read) == len(set(read)) == 30


@pytest.mark.parametrize(
    ("train", "val", "heldout"),
    [
        (0, 0, 0),  # no label at all: a new project, or a label window that left none
        (1, 0, 2),  # a label to fit on, none to validate on
    ],
)
async def test_too_few_labels_to_fit_and_validate_keep_the_seed_unfitted_and_say_so(
    train, val, heldout
):
    """A kappa of nothing raised 'no labels to compare against' and ended the night."""
    lm = ScriptedLM(p_first=lambda m: 0.8 if "<reply>\nright" in m[1]["content"] else 0.2)
    items = judged(train + val + heldout)
    parts = items[:train], items[train : train + val], items[train + val :]
    seed = {"rubric": "Judge the reply."}
    config = GEPAConfig(max_metric_calls=60, reflection_minibatch_size=4)

    async def reflect(prompt: str) -> str:
        raise AssertionError("nothing to search on")

    aligned = await align(lm, seed, PASS_FAIL, *parts, config, reflect)
    assert aligned.judge.prompts == seed == aligned.seed.prompts and aligned.metric_calls == 0
    assert aligned.judge.threshold == 0.5 and math.isnan(aligned.judge_val_score)
    assert aligned.sizes == {"train": train, "val": val, "heldout": heldout}
    assert aligned.skipped.startswith(f"Judge alignment skipped: {len(items)} labels")
    assert f"{train} to fit on, {val} to validate on" in aligned.skipped
    # only the held-out labels there are were read, to measure the seed on them
    assert len(lm.choice_calls) == heldout
    assert aligned.judge.heldout.get("n", 0) == heldout
