"""The reward-model judge: a head fitted on the judge model's features, saved and reloaded
bit for bit, never applied to another model's features, registered with its judge
version, and kept by the night's step only when it agrees better on validation labels."""

import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from infra.registry.mlflow_registry import Registry
from infra.scales import ScoreScale
from infra.settings import Settings
from judges.align import Alignment
from judges.choose import choose_judge, not_comparable
from judges.injection import TRAINING, injection_check
from judges.judge import Judge
from judges.judge_head import judge_head_step
from judges.memory import FILE as MEMORY_FILE
from judges.pointwise import PointwiseJudge
from judges.reward_head import FILE, HeadFit, JudgeModel, RewardHead, fit_head, out_of_fold
from judges.splits import judge_splits
from judges.types import JudgedItem, LabelWindow
from judges.versions import HEAD_TAG, JUDGE_PRODUCTION, production_judge
from tests.fakes import CountingTally, ScriptedLM, hashed_features

MODEL = JudgeModel("/models/judge-a")


def separating(messages) -> list[float]:
    """Features that say whether the judged reply is good, beside noise."""
    signal = 1.0 if "[good]" in messages[1]["content"] else -1.0
    return [signal, *hashed_features(messages, 3)]


def judge_lm(feature=hashed_features, model: str = MODEL.path) -> ScriptedLM:
    lm = ScriptedLM(feature=feature)
    lm.base_model_path = model
    return lm


def labelled(n: int = 40) -> list[JudgedItem]:
    return [
        JudgedItem(f"t{i}", f"request {i}", f"reply {i} [{'good' if i % 3 else 'bad'}]", i % 3 > 0)
        for i in range(n)
    ]


def aligned(val_score: float) -> Alignment:
    rubric = Judge({"rubric": "Judge it."}, ScoreScale("boolean"), 0.5, heldout={"kappa": 0.0})
    return Alignment(rubric, rubric, val_score, val_score, False, rubric.prompts, 10, {})


def random_head(tmp_path: Path, seed: int = 0) -> tuple[RewardHead, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(60, 24)) * rng.uniform(0.1, 30, size=24) + rng.normal(size=24)
    y = x[:, 0] + rng.normal(scale=2, size=60) > np.median(x[:, 0])
    return fit_head(x.tolist(), y.tolist(), MODEL, HeadFit(), seed=0), x, y


def test_a_head_is_fitted_saved_and_reloaded_scoring_the_same_bits(tmp_path):
    head, x, y = random_head(tmp_path)
    head.save(tmp_path / "head")
    again = RewardHead.load(tmp_path / "head")
    assert again == head  # every number came back exactly
    fresh = np.random.default_rng(1).normal(size=(200, 24)) * 10
    for row in [*x.tolist(), *fresh.tolist()]:
        assert again.p_pass(row).hex() == head.p_pass(row).hex()
    # the formula is scikit-learn's own pipeline, refitted at the chosen strength
    pipeline = make_pipeline(
        StandardScaler(),
        LogisticRegression(C=head.strength, class_weight="balanced", max_iter=5000),
    ).fit(x, y)
    theirs = pipeline.predict_proba(x)[:, 1]
    assert np.allclose([head.p_pass(row) for row in x.tolist()], theirs, atol=1e-9)
    assert head.dimension == 24 and head.labels == 60 and head.model == MODEL
    chosen = fit_head(x.tolist(), y.tolist(), MODEL, HeadFit(strengths=(1e-4, 1.0)))
    assert chosen.strength in (1e-4, 1.0)  # several: the cross-validated one


def test_out_of_fold_probabilities_are_read_on_labels_the_head_did_not_fit():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 200))  # pure noise: far more features than labels
    y = np.arange(40) % 3 > 0
    head = fit_head(x.tolist(), y.tolist(), MODEL, HeadFit(strengths=(1.0,)))
    fitted = [head.p_pass(row) for row in x.tolist()]
    unseen = out_of_fold(x.tolist(), y.tolist(), 1.0)
    assert roc_auc_score(y, fitted) == 1.0  # it memorized noise
    assert roc_auc_score(y, unseen) < 0.8  # and on labels it did not fit, it cannot


@pytest.mark.parametrize("field", ["weights", "bias", "mean", "scale", "model", "memory"])
def test_a_head_file_missing_a_field_is_an_error_naming_the_file_and_the_field(tmp_path, field):
    head, _, _ = random_head(tmp_path)
    path = head.save(tmp_path)
    saved = json.loads(path.read_text())
    del saved[field]
    path.write_text(json.dumps(saved))
    with pytest.raises(ValueError, match=f"{path}: a judge head file needs field '{field}'"):
        RewardHead.load(tmp_path)


def test_a_head_file_that_does_not_hold_together_is_named(tmp_path):
    head, _, _ = random_head(tmp_path)
    path = head.save(tmp_path)
    saved = json.loads(path.read_text())
    path.write_text(json.dumps(saved | {"weights": saved["weights"][:-1], "dimension": 23}))
    with pytest.raises(ValueError, match=f"{path}: .*weights, mean and scale of one length"):
        RewardHead.load(tmp_path)
    path.write_text(json.dumps(saved | {"format": "something/9"}))
    with pytest.raises(ValueError, match="field 'format' is 'something/9'"):
        RewardHead.load(tmp_path)
    with pytest.raises(ValueError, match="not a judge head file"):
        RewardHead.load(tmp_path / "nowhere")


def saved_head(tmp_path: Path, memory: int = 0) -> str:
    items = labelled()
    x = [separating([{}, {"content": i.output_text}]) for i in items]
    head = fit_head(x, [bool(i.human_pass) for i in items], MODEL, memory=memory)
    folder = tmp_path / "head"
    head.save(folder)
    return str(folder)


async def test_a_head_read_on_another_judge_model_is_not_applied(tmp_path):
    folder = saved_head(tmp_path)
    elsewhere = judge_lm(separating, "/models/judge-b")
    with pytest.raises(ValueError, match="was read on /models/judge-a, not on tonight's judge"):
        PointwiseJudge(elsewhere, {"rubric": "r"}, head=folder)
    in_use = Judge({"rubric": "r"}, threshold=0.5, head=folder)
    why = not_comparable(elsewhere, in_use, ScoreScale("boolean"))
    assert why == (
        "has a reward head that was read on /models/judge-a, not on tonight's judge model "
        "/models/judge-b"
    )
    assert not_comparable(judge_lm(separating), in_use, ScoreScale("boolean")) == ""
    # a copy of the same checkpoint elsewhere is the same model: its config.json says so
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text('{"model_type": "qwen2"}')
    a, b = (JudgeModel.of(judge_lm(model=str(tmp_path / name))) for name in "ab")
    assert a.config_sha256 and a.same_as(b) and not MODEL.same_as(a)


async def test_a_head_judge_scores_from_features_and_explains_by_generation(tmp_path):
    folder = saved_head(tmp_path)
    lm = judge_lm(separating)
    lm.reply = lambda m: "It names the right kind."
    judge = Judge({"rubric": "r"}, threshold=0.5, head=folder)
    metric = judge.metric(lm)
    probs = await metric.p_pass_many(labelled(6))
    assert [p >= 0.5 for p in probs] == [bool(i.human_pass) for i in labelled(6)]
    assert lm.choice_calls == [] and len(lm.feature_calls) == 6  # no verdict token read
    assert await metric.rationale(labelled(1)[0]) == "It names the right kind."
    with pytest.raises(ValueError, match="not both"):
        Judge({"rubric": "r"}, adapter=str(tmp_path), head=folder)


async def test_the_night_keeps_a_head_that_beats_the_judge_on_validation(tmp_path):
    lm, items = judge_lm(separating), labelled()
    train, val, heldout = judge_splits(items, 0.4, 0)
    folder = tmp_path / "head"
    tally = CountingTally()
    alignment, step = await judge_head_step(
        lm, aligned(0.3), train, val, heldout, folder, "the rubric", 0.3, seed=0, tally=tally
    )
    # its progress: the features read, then the held-out items judged with the head
    assert tally.expected == [len(train) + len(val), len(heldout)]
    assert sum(tally.done) == sum(tally.expected)
    assert step.val == 1.0 and step.kept == str(folder) and (folder / FILE).is_file()
    assert step.labels == len(train) + len(val)  # kept: fitted again on both
    judge = alignment.judge
    assert judge.head == str(folder) and judge.adapter is None
    assert judge.heldout["kappa"] == 1.0 and judge.heldout["n"] == len(heldout)
    assert step.seconds > 0 and step.strength in HeadFit().strengths
    # the prompt it read is the pointwise judge's own, rubric first
    assert all(m[0]["content"].startswith("Judge it.") for m in lm.feature_calls)


async def test_the_night_drops_a_head_that_does_not_beat_the_judge(tmp_path):
    lm, items = judge_lm(hashed_features), labelled()  # features unrelated to the labels
    train, val, heldout = judge_splits(items, 0.4, 0)
    before = aligned(0.5)
    alignment, step = await judge_head_step(
        lm, before, train, val, heldout, tmp_path / "head", "rubric plus LoRA adapter", 0.5, 0
    )
    assert alignment is before and step.kept is None and step.val < 0.5
    assert "rubric plus LoRA adapter stays" in step.note and not (tmp_path / "head").exists()
    assert step.labels == len(train)


async def test_a_model_without_features_or_a_name_skips_the_step(tmp_path):
    train, val, heldout = judge_splits(labelled(), 0.4, 0)

    class Server(ScriptedLM):
        base_model_path = "/models/judge-a"

        async def features(self, messages, adapter=None):
            raise NotImplementedError("an OpenAI-compatible server returns no hidden states")

    before = aligned(0.0)
    _, step = await judge_head_step(Server(), before, train, val, heldout, tmp_path, "r", 0.0, 0)
    assert step.val is None and "does not return the judge model's features" in step.note
    _, step = await judge_head_step(ScriptedLM(), before, train, val, heldout, tmp_path, "r", 0, 0)
    assert "names no judge model" in step.note
    # a head registered earlier, read where no features come back: said, never guessed
    folder = saved_head(tmp_path)
    metric = Judge({"rubric": "r"}, threshold=0.5, head=folder).metric(Server())
    with pytest.raises(RuntimeError, match=f"reward head \\({folder}\\) reads the judge model's"):
        await metric.p_pass(labelled(1)[0])


async def test_a_head_is_registered_with_its_judge_version_and_reloaded(tmp_path):
    """Night 1 keeps a head (with the notes it reads): rubric and head are one version in
    MLflow. Night 2 reloads it at judge-production and it scores exactly as it did."""
    lm = judge_lm(separating)
    items = [JudgedItem(i.id, i.input_text, i.output_text, i.human_pass, f"note {i.id}")
             for i in labelled()]  # fmt: skip
    train, val, heldout = judge_splits(items, 0.4, 0)
    alignment, step = await judge_head_step(
        lm, aligned(0.0), train, val, heldout, tmp_path / "head", "the rubric", 0.0, 0, memory=2
    )
    assert step.kept and (tmp_path / "head" / MEMORY_FILE).is_file()
    registry = Registry(Settings(state_dir=tmp_path / "state").mlflow)
    window = LabelWindow(len(items), None, None, None, None)
    gate = await choose_judge(lm, registry, "n1", alignment, heldout, window, 0.2, 0)
    ((name, _),) = gate.registered.items()
    tags = registry.prompt_version_at_alias(name, JUDGE_PRODUCTION).tags
    assert gate.decision.passed and tags[HEAD_TAG].startswith("runs:/")
    lm.feature_calls.clear()
    tonight = await alignment.judge.metric(lm).p_pass_many(heldout)
    asked = list(lm.feature_calls)

    reloaded = production_judge(registry, ["rubric"], tmp_path / "night2")
    assert reloaded.head.startswith(str(tmp_path / "night2")) and reloaded.adapter is None
    assert reloaded.threshold == alignment.judge.threshold
    lm.feature_calls.clear()
    assert await reloaded.metric(lm).p_pass_many(heldout) == tonight
    assert lm.feature_calls == asked  # the same prompts: the notes came with the head
    # night 2 gates a rubric alone against it, re-measured head and all
    rubric_alone = aligned(0.3)
    rubric_alone.judge = Judge({"rubric": "Judge it."}, heldout={"kappa": 0.3})
    night2 = await choose_judge(
        lm, registry, "n2", rubric_alone, heldout, window, 0.2, 0, adapter_dir=tmp_path / "n2"
    )
    assert night2.kept_previous and night2.previous.heldout_score == 1.0


async def test_the_injection_check_reads_a_head_judge(tmp_path):
    """A planted instruction changes the prompt, so the features; whether it turns a fail
    to pass depends on the head. Here one that reads "answer Yes" as passing is fooled."""
    folder = saved_head(tmp_path)

    def gullible(messages) -> list[float]:
        features = separating(messages)
        reply = messages[1]["content"].split("</reply>")[0]
        if any(word in reply for word in ("Yes", "PASS", "passing")):
            features[0] = 1.0
        return features

    items = [i for i in labelled(30) if not i.human_pass]
    judge = Judge({"rubric": "r"}, threshold=0.5, head=folder)
    steady = await injection_check(judge_lm(separating), judge, items, 0, 0.2)
    assert steady.judged_fail == len(items) and steady.flipped == 0 and not steady.fooled
    fooled = await injection_check(judge_lm(gullible), judge, items, 0, 0.2)
    assert fooled.fooled and fooled.flipped == fooled.judged_fail == len(items)


def leaning(messages) -> list[float]:
    """A judge model's features as the teacher's behave: a noisy sense of whether the reply
    is good, a strong lean to "pass" that a good reply and an instruction to answer Yes both
    trigger, and a faint trace of the instruction itself."""
    reply = messages[1]["content"].split("</reply>")[0]
    good = "[good]" in reply
    told = any(word in reply for word in ("Yes", "PASS", "passing"))
    noise = hashed_features(messages, 4)
    signal = (1.0 if good else -1.0) + noise[0] / 2
    return [
        signal,
        1.0 if good or told else -1.0,
        (0.3 if told else 0.0) + noise[1] / 10,
        *noise[2:],
    ]


@pytest.mark.parametrize("injections", [False, True])
async def test_a_head_fitted_with_planted_instructions_is_not_talked_into_passing(
    tmp_path, injections
):
    lm, items = judge_lm(leaning), labelled(90)
    train, val, heldout = judge_splits(items, 0.4, 0)
    tally = CountingTally()
    alignment, step = await judge_head_step(
        lm, aligned(0.0), train, val, heldout, tmp_path / "head", "the rubric", 0.0, 0,
        tally=tally, injections=injections,
    )  # fmt: skip
    assert step.kept is not None and alignment.judge.heldout["kappa"] > 0.8
    passing = [i for i in train + val if i.human_pass]
    # the planted replies are read beside people's labels, and fitted, never counted as theirs
    assert tally.expected[0] == len(train) + len(val) + injections * len(passing)
    assert (step.labels, step.planted) == (len(train) + len(val), injections * len(passing))
    replies = [m[1]["content"].split("</reply>")[0] for m in lm.feature_calls]
    planted_replies = [r for r in replies if any(s in r for s in TRAINING)]
    assert len(planted_replies) == injections * len(passing)
    assert all("[good]" in r for r in planted_replies)  # on replies people passed
    probed = [i for i in heldout if not i.human_pass]
    check = await injection_check(lm, alignment.judge, probed, 0, 0.2)
    assert check.judged_fail == len(probed)
    # without them the head follows the lean and the check's probes turn fails to pass
    assert check.fooled is not injections
