"""The judge gate over three nights, on a real sqlite MLflow and a scripted judge model."""

from datetime import UTC, datetime

import pytest

from flows.collect import Collected, LabelWindow
from flows.judge_gate import gate_judge_stage
from flows.judge_versions import JUDGE_PRODUCTION, THRESHOLD_TAG, production_judge
from flows.runtime import Runtime
from flows.stages import JudgeStage, judge_splits
from infra.settings import Settings
from judges.types import JudgedItem
from tests.fakes import ScriptedLM

pytest.importorskip("infra.registry.mlflow_registry")
from infra.registry.mlflow_registry import RegistryError  # noqa: E402

WINDOW = LabelWindow(
    labels=20,
    first=datetime(2026, 11, 28, 8, tzinfo=UTC),
    last=datetime(2026, 11, 29, 20, tzinfo=UTC),
    since=None,
    fetched_at=datetime(2026, 11, 30, 2, tzinfo=UTC),
)


class JudgeModel(ScriptedLM):
    """A rubric containing "sharp" reads every reply right; any other one is a coin flip.
    Records which replies it judged."""

    def __init__(self):
        super().__init__(p_first=self._p)
        self.judged: list[str] = []

    def _p(self, messages):
        rubric, question = messages[0]["content"], messages[1]["content"]
        self.judged.append(question.split("Reply:\n")[1].split("\n")[0])
        if "sharp" not in rubric:
            return 0.5
        return 0.9 if "[good]" in question else 0.1


@pytest.fixture(scope="module")
def rt(tmp_path_factory) -> Runtime:
    runtime = Runtime(Settings(state_dir=tmp_path_factory.mktemp("gate") / "state"))
    runtime.__dict__["lm"] = JudgeModel()  # the seam: the cached LM
    return runtime


def collected() -> Collected:
    items = [
        JudgedItem(f"t{i}", f"request {i}", f"reply {i} [{'good' if i % 2 else 'bad'}]", i % 2 == 1)
        for i in range(20)
    ]
    return Collected(examples=[], items=items, window=WINDOW)


def aligned(component: str, rubric: str, kappa: float, threshold: float) -> JudgeStage:
    return JudgeStage(
        prompts={component: rubric},
        threshold=threshold,
        heldout={"kappa": kappa, "kappa_low": kappa - 0.2, "kappa_high": kappa + 0.1, "n": 8.0},
        seed_prompts={component: "seed"},
        seed_threshold=0.5,
        seed_heldout={"kappa": 0.0},
        val_kappa=kappa,
        seed_val_kappa=0.0,
        kept_seed=False,
        metric_calls=10,
        sizes={"train": 7, "val": 5, "heldout": 8},
        min_kappa=0.2,
    )


async def test_three_nights_pass_keep_and_replace(rt):
    registry, night = rt.registry, collected()
    name = registry.prompt_name("judge-rubric")

    first = await gate_judge_stage(rt, "n1", aligned("rubric", "sharp v1", 0.8, 0.4321), night)
    assert first.decision.passed and first.previous is None
    assert (
        first.registered == {name: 1} and first.judge.is_new and first.judge.versions == {name: 1}
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

    # Night 2: the new rubric is a coin flip; the judge in use, re-measured on tonight's
    # held-out traces with its stored threshold, agrees perfectly and is kept.
    rt.lm.judged.clear()
    second = await gate_judge_stage(rt, "n2", aligned("rubric", "vague", 0.3, 0.5), night)
    heldout = {item.output_text for item in judge_splits(rt, night.items)[2]}
    assert set(rt.lm.judged) == heldout  # the same held-out items, and only those
    assert not second.decision.passed and second.decision.keeps_in_use
    assert second.previous.heldout_kappa == 1.0 and second.previous.threshold == 0.4321
    assert second.judge == second.previous and not second.judge.is_new
    assert second.judge.prompts == {"rubric": "sharp v1"} and second.judge.versions == {name: 1}
    assert second.decision.reason == (
        f"new judge kappa 0.30 < {name} v1's 1.00 on tonight's held-out labels; kept {name} v1"
    )
    assert second.registered == {name: 2}  # registered all the same, with why it failed
    assert registry.client.get_prompt_version(name, 2).tags["flywheel.judge.gate"] == "failed"
    assert registry.prompt_version_at_alias(name, JUDGE_PRODUCTION).version == 1

    third = await gate_judge_stage(rt, "n3", aligned("rubric", "sharp v3", 1.0, 0.5), night)
    assert third.decision.passed and third.judge.versions == {name: 3}
    assert registry.prompt_version_at_alias(name, JUDGE_PRODUCTION).version == 3


async def test_first_judge_below_the_floor_runs_untrusted_without_the_alias(rt):
    gate = await gate_judge_stage(rt, "n1", aligned("weak", "vague", 0.05, 0.5), collected())
    name = rt.registry.prompt_name("judge-weak")
    assert not gate.decision.passed and gate.previous is None
    assert gate.judge.is_new and not gate.judge.trusted and gate.judge.versions == {name: 1}
    assert rt.registry.prompt_version_at_alias(name, JUDGE_PRODUCTION) is None


def test_a_production_judge_without_its_threshold_is_refused(rt):
    name = rt.registry.prompt_name("judge-handmade")
    version = rt.registry.register_prompt(name, "rubric typed by hand")
    rt.registry.set_prompt_alias(name, JUDGE_PRODUCTION, version)
    with pytest.raises(RegistryError, match=rf"{name} v1 .*{THRESHOLD_TAG}"):
        production_judge(rt.registry, ["handmade"])
    assert production_judge(rt.registry, ["never-registered"]) is None
