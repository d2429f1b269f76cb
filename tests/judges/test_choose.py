"""The night's judge gate over three nights, on a real sqlite MLflow and a scripted judge."""

import json
import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from infra.lm.adapter_base import servable_on
from infra.registry.mlflow_registry import Registry, RegistryError
from infra.scales import ScoreScale
from infra.settings import Settings
from judges.agreement import primary_metric
from judges.align import Alignment
from judges.choose import JudgeGate, choose_judge
from judges.judge import Judge
from judges.splits import judge_splits
from judges.types import JudgedItem, LabelWindow
from judges.versions import (
    JUDGE_PRODUCTION,
    SCALE_TAG,
    THRESHOLD_TAG,
    production_judge,
    scale_from_json,
    scale_json,
)
from tests.fakes import CountingTally, ScriptedLM

WINDOW = LabelWindow(
    labels=20,
    first=datetime(2026, 11, 28, 8, tzinfo=UTC),
    last=datetime(2026, 11, 29, 20, tzinfo=UTC),
    since=None,
    fetched_at=datetime(2026, 11, 30, 2, tzinfo=UTC),
)

BOOLEAN = ScoreScale("boolean")
STARS = ScoreScale("numeric", minimum=1, maximum=5, name="stars")


class JudgeModel(ScriptedLM):
    """A rubric containing "sharp" reads every reply right; any other one is a coin flip.
    Records which replies it judged."""

    def __init__(self):
        super().__init__(p_first=self._p)
        self.judged: list[str] = []

    def _p(self, messages):
        rubric, question = messages[0]["content"], messages[1]["content"]
        self.judged.append(question.split("<reply>\n")[1].split("\n")[0])
        if "sharp" not in rubric:
            return 0.5
        return 0.9 if "[good]" in question else 0.1

    async def choice_logprobs(self, messages, choices, adapter=None):
        """On a 1-5 score, "sharp" reads the stars the reply was given; any other says 3."""
        if choices == ["Yes", "No"]:
            return await super().choice_logprobs(messages, choices, adapter)
        rubric, question = messages[0]["content"], messages[1]["content"]
        self.judged.append(question.split("<reply>\n")[1].split("\n")[0])
        stars = question.split("[stars ")[1][0] if "sharp" in rubric else "3"
        return [0.0 if choice == stars else math.log(1e-6) for choice in choices]


class Night:
    """Registry and judge model shared by the nights of one test module."""

    def __init__(self, state):
        self.settings = Settings(state_dir=state)
        self.registry = Registry(self.settings.mlflow)
        self.lm = JudgeModel()


@pytest.fixture(scope="module")
def rt(tmp_path_factory) -> Night:
    return Night(tmp_path_factory.mktemp("gate") / "state")


def prompts_named(rt: Night, monkeypatch, prefix: str) -> None:
    """The registry's prompts under prefix `prefix` for one test."""
    settings = rt.registry.settings.model_copy(update={"prompt_name": prefix})
    monkeypatch.setattr(rt.registry, "settings", settings)


def collected() -> list[JudgedItem]:
    return [
        JudgedItem(f"t{i}", f"request {i}", f"reply {i} [{'good' if i % 2 else 'bad'}]", i % 2 == 1)
        for i in range(20)
    ]


def graded() -> list[JudgedItem]:
    """Twenty replies given 1 to 5 stars by the humans."""
    return [
        JudgedItem(
            f"g{i}", f"request {i}", f"reply {i} [stars {1 + i % 5}]", human_value=1.0 + i % 5
        )
        for i in range(20)
    ]


def heldout_of(items: list[JudgedItem]) -> list[JudgedItem]:
    return judge_splits(items, 0.4, 0)[2]


async def gate_judge_stage(
    rt: Night,
    run_id: str,
    alignment: Alignment,
    items: list[JudgedItem],
    min_labels: int = 0,
    window: LabelWindow = WINDOW,
) -> JudgeGate:
    return await choose_judge(
        rt.lm, rt.registry, run_id, alignment, heldout_of(items), window, 0.2, 0, min_labels
    )


def aligned(
    component: str, rubric: str, kappa: float, threshold: float, scale: ScoreScale = BOOLEAN
) -> Alignment:
    """Tonight's aligned judge, with `kappa` as its primary statistic on held-out labels."""
    key = primary_metric(scale)
    heldout = {key: kappa, f"{key}_low": kappa - 0.2, f"{key}_high": kappa + 0.1, "n": 8.0}
    return Alignment(
        judge=Judge({component: rubric}, scale, threshold, heldout=heldout),
        seed=Judge({component: "seed"}, scale, 0.5, heldout={key: 0.0}),
        val_score=kappa,
        seed_val_score=0.0,
        kept_seed=False,
        searched={component: rubric},
        metric_calls=10,
        sizes={"train": 7, "val": 5, "heldout": 8},
    )


async def test_nights_pass_keep_and_replace(rt):
    registry, night = rt.registry, collected()
    name = registry.prompt_name("judge-rubric")

    first = await gate_judge_stage(rt, "n1", aligned("rubric", "sharp v1", 0.8, 0.4321), night)
    assert first.decision.passed and first.previous is None
    assert (
        first.registered == {name: 1}
        and not first.kept_previous
        and first.judge.versions == {name: 1}
    )
    version = registry.client.get_prompt_version(name, 1)
    assert version.tags[THRESHOLD_TAG] == "0.4321" and version.tags["flywheel.run_id"] == "n1"
    assert version.tags["flywheel.judge.heldout.kappa"] == "0.8000"
    assert version.tags["flywheel.judge.heldout.kappa_low"] == "0.6000"
    assert version.tags["flywheel.judge.gate"] == "passed"
    assert version.tags["flywheel.judge.window.labels"] == "20"
    assert version.tags["flywheel.judge.window.first_label"] == "2026-11-28T08:00:00+00:00"
    assert version.tags["flywheel.judge.window.fetched_at"] == "2026-11-30T02:00:00+00:00"
    assert version.tags["flywheel.judge.labels.train"] == "7"
    assert registry.prompt_version_at_alias(name, JUDGE_PRODUCTION).version == 1
    # reloaded with what it was registered with: what watching it next nights compares to
    stored = production_judge(registry, ["rubric"])
    # the newest label it learned from, on the source's clock as the labels it is watched on
    assert stored.made_at == WINDOW.last != WINDOW.fetched_at and stored.heldout["kappa"] == 0.8

    # Night 2: the new rubric is a coin flip; the judge in use, re-measured on tonight's
    # held-out traces with its stored threshold, agrees perfectly and is kept.
    rt.lm.judged.clear()
    second = await gate_judge_stage(rt, "n2", aligned("rubric", "vague", 0.3, 0.5), night)
    heldout = {item.output_text for item in heldout_of(night)}
    assert set(rt.lm.judged) == heldout  # the same held-out items, and only those
    assert not second.decision.passed and second.decision.keeps_in_use
    assert second.previous.heldout_score == 1.0 and second.previous.threshold == 0.4321
    assert second.judge == second.previous and second.kept_previous
    assert second.judge.prompts == {"rubric": "sharp v1"} and second.judge.versions == {name: 1}
    assert second.decision.reason == (
        f"new judge kappa 0.30 < {name} v1's 1.00 on tonight's held-out labels; kept {name} v1"
    )
    assert second.registered == {name: 2}  # registered all the same, with why it failed
    assert registry.client.get_prompt_version(name, 2).tags["flywheel.judge.gate"] == "failed"
    assert registry.prompt_version_at_alias(name, JUDGE_PRODUCTION).version == 1

    # Night 3: as good as v1 on the same labels, and nothing newer taught it: v1 is kept
    same = await gate_judge_stage(rt, "n3", aligned("rubric", "sharp v3", 1.0, 0.5), night)
    assert not same.decision.passed and same.kept_previous and same.judge.versions == {name: 1}
    assert "no label newer than those" in same.decision.reason

    # Night 4: a tie again, from a window with a label newer than v1's: it replaces v1
    later = replace(WINDOW, labels=21, last=WINDOW.last + timedelta(days=1))
    fourth = await gate_judge_stage(
        rt, "n4", aligned("rubric", "sharp v4", 1.0, 0.5), night, window=later
    )
    assert fourth.decision.passed and fourth.judge.versions == {name: 4}
    assert registry.prompt_version_at_alias(name, JUDGE_PRODUCTION).version == 4


async def test_first_judge_below_the_floor_runs_untrusted_without_the_alias(rt):
    gate = await gate_judge_stage(rt, "n1", aligned("weak", "vague", 0.05, 0.5), collected())
    name = rt.registry.prompt_name("judge-weak")
    assert not gate.decision.passed and gate.previous is None
    assert not gate.kept_previous and not gate.trusted and gate.judge.versions == {name: 1}
    assert rt.registry.prompt_version_at_alias(name, JUDGE_PRODUCTION) is None


async def test_with_no_judge_above_the_floor_the_night_runs_on_the_best_on_heldout(rt):
    """Alignment chose a rubric that agrees less with people on held-out labels than the
    seed (a restated meta-prompt did, in a real night): the seed steers the night."""
    gamed = aligned("gamed", "What is the task?", -0.02, 0.5)
    gamed.seed = replace(gamed.seed, heldout={"kappa": 0.108})
    gate = await gate_judge_stage(rt, "n1", gamed, collected())
    name = rt.registry.prompt_name("judge-gamed")
    assert gate.judge.prompts == {"gamed": "seed"} and not gate.trusted
    assert gate.registered == {name: 1}  # tonight's is registered, as the record of why not
    assert gate.decision.reason.endswith(
        "so the night runs on the seed rubric, the best of tonight's aligned judge, the seed "
        "rubric on tonight's held-out labels (kappa 0.11), marked untrusted"
    )
    assert rt.registry.prompt_version_at_alias(name, JUDGE_PRODUCTION) is None
    # tonight's judge, when it is the better one, is what the night runs on
    better = await gate_judge_stage(rt, "n2", aligned("gamed", "closer", 0.15, 0.5), collected())
    assert better.judge.prompts == {"gamed": "closer"} and better.judge.versions == {name: 2}


async def test_a_judge_measured_on_too_few_labels_is_neither_promoted_nor_trusted(rt):
    night = collected()
    strong = aligned("few", "sharp", 0.9, 0.5)
    gate = await gate_judge_stage(rt, "n1", strong, night, min_labels=len(heldout_of(night)) + 1)
    name = rt.registry.prompt_name("judge-few")
    assert not gate.decision.passed and not gate.trusted
    assert f"on only {len(heldout_of(night))} held-out labels" in gate.decision.reason
    assert rt.registry.prompt_version_at_alias(name, JUDGE_PRODUCTION) is None


def test_a_production_judge_without_its_threshold_is_refused(rt):
    name = rt.registry.prompt_name("judge-handmade")
    version = rt.registry.register_prompt(name, "rubric typed by hand")
    rt.registry.set_prompt_alias(name, JUDGE_PRODUCTION, version)
    with pytest.raises(RegistryError, match=rf"{name} v1 .*{THRESHOLD_TAG}"):
        production_judge(rt.registry, ["handmade"])
    assert production_judge(rt.registry, ["never-registered"]) is None


async def test_a_graded_night_gates_on_weighted_kappa(rt, monkeypatch):
    prompts_named(rt, monkeypatch, "graded")  # judges read "rubric"
    name = rt.registry.prompt_name("judge-rubric")
    night = graded()
    first = await gate_judge_stage(rt, "n1", aligned("rubric", "sharp v1", 0.8, 0.5, STARS), night)
    assert first.decision.passed and first.judge.scale == STARS
    assert first.decision.reason.startswith("new judge weighted_kappa 0.80 >= floor 0.20")
    assert rt.registry.client.get_prompt_version(name, 1).tags[SCALE_TAG] == scale_json(STARS)

    # The judge in use is re-measured on tonight's held-out stars, on the same statistic.
    rt.lm.judged.clear()
    second = await gate_judge_stage(rt, "n2", aligned("rubric", "vague", 0.3, 0.5, STARS), night)
    assert set(rt.lm.judged) == {i.output_text for i in heldout_of(night)}
    assert second.decision.keeps_in_use and second.judge == second.previous
    assert second.previous.heldout_score == 1.0 and second.previous.scale == STARS
    assert second.decision.reason == (
        f"new judge weighted_kappa 0.30 < {name} v1's 1.00 on tonight's held-out labels; "
        f"kept {name} v1"
    )


async def test_a_judge_in_use_on_another_scale_is_not_compared(rt, monkeypatch):
    prompts_named(rt, monkeypatch, "switched")
    name = rt.registry.prompt_name("judge-rubric")
    await gate_judge_stage(rt, "n1", aligned("rubric", "sharp v1", 0.9, 0.5, STARS), graded())
    rt.lm.judged.clear()
    # Tonight the humans annotate pass/fail: a weaker judge than the stars one still passes.
    night = await gate_judge_stage(rt, "n2", aligned("rubric", "sharp v2", 0.4, 0.5), collected())
    assert rt.lm.judged == []  # the stars judge was not re-measured
    assert night.decision.passed and night.previous is None and night.judge.scale == BOOLEAN
    assert night.decision.reason == (
        "new judge kappa 0.40 >= floor 0.20, no judge in use yet; it becomes judge-production; "
        f"{name} v1 at judge-production answers on a numeric 1 to 5 scale, not tonight's "
        "boolean, so it was not compared"
    )
    assert production_judge(rt.registry, ["rubric"]).versions == {name: 2}


class ServingJudgeModel(JudgeModel):
    """The judge model as an engine that serves adapters, on the checkpoint `base`."""

    def __init__(self, base: str):
        super().__init__()
        self.base_model_path, self.served = base, []

    async def adapters(self):
        return list(self.served)

    async def load_adapter(self, name, path):
        self.served.append(name)


def judge_adapter(folder, base: str) -> str:
    """An adapter folder whose peft config names the base it was trained from."""
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": base}))
    (folder / "adapter_model.safetensors").write_bytes(b"weights")
    return str(folder)


async def test_a_judge_in_use_that_tonights_judge_model_cannot_serve_is_not_compared(
    rt, tmp_path, monkeypatch
):
    prompts_named(rt, monkeypatch, "bigger")
    name = rt.registry.prompt_name("judge-rubric")
    small = ServingJudgeModel(str(tmp_path / "small-model"))
    first = aligned("rubric", "sharp v1", 0.9, 0.5)
    adapter = judge_adapter(tmp_path / "adapter", small.base_model_path)
    first = replace(first, judge=replace(first.judge, adapter=adapter))
    heldout = heldout_of(collected())
    await choose_judge(small, rt.registry, "n1", first, heldout, WINDOW, 0.2, 0)
    # the same judge model: the one in use is re-measured with its adapter, and kept
    tally = CountingTally()
    vague = aligned("rubric", "vague", 0.3, 0.5)
    second = await choose_judge(
        small, rt.registry, "n2", vague, heldout, WINDOW, 0.2, 0, tally=tally
    )
    assert small.served and second.previous is not None and second.decision.keeps_in_use
    assert tally.expected == [len(heldout)] == [sum(tally.done)]  # the one in use re-judged
    # tonight a larger judge model: last night's adapter cannot load on it
    large = ServingJudgeModel(str(tmp_path / "large-model"))
    third = await choose_judge(
        large, rt.registry, "n3", aligned("rubric", "sharp v3", 0.4, 0.5), heldout, WINDOW, 0.2, 0
    )
    assert large.served == [] and third.previous is None and third.decision.passed
    assert third.decision.reason.endswith(
        f"{name} v1 at judge-production has an adapter trained on {small.base_model_path}, "
        "not tonight's judge model, so it was not compared"
    )
    assert production_judge(rt.registry, ["rubric"]).versions == {name: 3}


def test_an_adapter_is_servable_only_on_the_model_it_was_trained_from(tmp_path):
    for name, layers in (("small", 30), ("copy", 30), ("large", 32)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps({"num_hidden_layers": layers}))
    adapter = judge_adapter(tmp_path / "adapter", str(tmp_path / "small"))
    assert servable_on(ServingJudgeModel(str(tmp_path / "small")), adapter)
    assert servable_on(ServingJudgeModel(str(tmp_path / "copy")), adapter)  # the same config
    assert not servable_on(ServingJudgeModel(str(tmp_path / "large")), adapter)
    assert not servable_on(ServingJudgeModel(str(tmp_path / "elsewhere")), adapter)
    assert not servable_on(JudgeModel(), adapter)  # a model that serves no adapters
    unnamed = tmp_path / "unnamed"
    unnamed.mkdir()
    (unnamed / "adapter_config.json").write_text("{}")
    assert servable_on(ServingJudgeModel(str(tmp_path / "large")), unnamed)  # loading decides


def test_the_scale_round_trips_through_the_version_tags(rt):
    tone = ScoreScale("categorical", ("rude", "ok", "kind"), (0, 1, 2), ordinal=True, name="tone")
    for scale in (BOOLEAN, STARS, tone, ScoreScale("numeric", minimum=0.5)):
        assert scale_from_json(scale_json(scale)) == scale
    name = rt.registry.prompt_name("judge-toned")
    version = rt.registry.register_prompt(
        name, "r", tags={THRESHOLD_TAG: "0.5", SCALE_TAG: scale_json(tone)}
    )
    rt.registry.set_prompt_alias(name, JUDGE_PRODUCTION, version)
    assert production_judge(rt.registry, ["toned"]).scale == tone
    # A version registered before scales were recorded is pass/fail.
    old = rt.registry.prompt_name("judge-old")
    rt.registry.set_prompt_alias(
        old, JUDGE_PRODUCTION, rt.registry.register_prompt(old, "r", tags={THRESHOLD_TAG: "0.4"})
    )
    assert production_judge(rt.registry, ["old"]).scale == BOOLEAN
    broken = rt.registry.prompt_name("judge-broken")
    rt.registry.set_prompt_alias(
        broken,
        JUDGE_PRODUCTION,
        rt.registry.register_prompt(broken, "r", tags={THRESHOLD_TAG: "0.4", SCALE_TAG: "{"}),
    )
    with pytest.raises(RegistryError, match=rf"{broken} v1 .*invalid tag {SCALE_TAG}"):
        production_judge(rt.registry, ["broken"])


async def test_with_no_held_out_labels_the_judge_in_use_is_kept_unmeasured(rt, monkeypatch):
    """A night with no labels (a quiet week) measured the judge in use on nothing, which
    raised; it keeps it, untrusted, and says why."""
    prompts_named(rt, monkeypatch, "quiet")
    first = await gate_judge_stage(rt, "n1", aligned("rubric", "sharp", 0.8, 0.4), collected())
    assert first.decision.passed
    rt.lm.judged.clear()
    quiet = await gate_judge_stage(rt, "n2", aligned("rubric", "seed", 0.0, 0.5), [])
    assert rt.lm.judged == []  # nothing to judge
    assert quiet.kept_previous and quiet.judge.prompts == {"rubric": "sharp"}
    assert not quiet.decision.passed and not quiet.trusted
    assert quiet.decision.reason.startswith("the new judge measured on no held-out labels")
