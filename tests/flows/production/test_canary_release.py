"""A canary's life, on a real sqlite MLflow and the real Langfuse SDK against a local fake of
its prompts API: a passing night publishes it, the next night judges the traffic it served
and promotes it or rolls it back."""

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from prefect import flow

from flows import nightly
from flows.night.canary_check import split_traffic
from flows.night.clock import StageClock
from flows.night.collect import Collected
from flows.night.runtime import Runtime
from flows.production import serving
from flows.production.canary_release import PUBLISHED, ROLLED_BACK
from flows.production.gate import Evidence, PromotionDecision
from flows.production.promotion import (
    CANARY,
    DECISION,
    PRODUCTION,
    history,
    publish_managed,
)
from flows.report.status import status_lines
from infra.registry.mlflow_registry import Registry
from infra.settings import Settings, TraceSettings
from infra.traces.prompt_hub import PromptHub
from infra.traces.types import TraceRecord
from infra.types import Example
from judges.choose import JudgeGate
from judges.gate import GateDecision
from judges.judge import Judge
from judges.types import JudgedItem
from tests.fake_langfuse_prompts import FakeLangfusePrompts
from tests.fakes import ScriptedLM
from tests.flows.production.test_promotion import night as registered_night
from tests.prefect_harness import prefect_harness

MODEL = "agent"
PASSED = PromotionDecision(True, "held-out gain +0.400 [0.200, 0.600]; passed", 0.4, 0.2, 0.6)
JUDGE = Judge({"rubric": "r"}, threshold=0.5, versions={"a-judge": 1}, heldout={"kappa": 0.8})
TRUSTED = JudgeGate(GateDecision(True, "passed", 0.8, 0.5), JUDGE.versions, JUDGE, None)
GOOD, BAD = "a good reply", "a bad reply"


@pytest.fixture(scope="module")
def harness():
    with prefect_harness():
        yield


def night(registry: Registry, name: str, baseline: int | None) -> int:
    """What a night registers (a prompt version, a model version), with evidence it won."""
    ids = [f"e{i}" for i in range(30)]
    evidence = Evidence(
        {i: 1.0 for i in ids}, dict.fromkeys(ids, 0.0), by_labels=True, production_version=baseline
    )
    return registered_night(registry, name, evidence, alias=None)


class World:
    """Production v1 of the model on the hub's prompt "router"; a passing night's version
    registered, its prompt published as the candidate with the share (as registration
    does), and gone out as the canary."""

    def __init__(self, tmp_path, fake: FakeLangfusePrompts):
        self.fake = fake
        fake.store.create({"name": "router", "prompt": "seed text", "labels": [PRODUCTION]})
        settings = Settings(
            state_dir=tmp_path,
            promotion={"canary_share": 0.25, "resamples": 300, "canary_min_traces": 10},
        )
        self.registry = Registry(settings.mlflow)
        managed = TraceSettings(managed_prompts={"instructions": "router"})
        self.hub = PromptHub(managed, api=fake.sdk_api())
        self.rt = Runtime(settings, registry=self.registry)
        self.rt._objects["prompt_hub"] = self.hub
        self.production = night(self.registry, "n0", None)
        publish_managed(
            self.registry, self.hub, MODEL, self.production, {"instructions": "n0"}, ["candidate"]
        )
        moved = asyncio.run(
            serving.promote(
                None, self.registry, MODEL, self.production, settings.promotion, "ada", hub=self.hub
            )
        )
        assert moved.action == "promoted"
        self.canary = night(self.registry, "n1", self.production)
        share = {"canary_share": 0.25}
        made = publish_managed(
            self.registry,
            self.hub,
            MODEL,
            self.canary,
            {"instructions": "n1"},
            ["candidate"],
            config=share,
        )
        self.canary_prompt = made["router"]
        self.production_prompt = self.hub.production()["instructions"].version
        # a night's stages are cached by run id, in the harness all tests share
        self.run_id = tmp_path.name
        self.published = self.run(self.move, f"{self.run_id}-n1")

    async def move(self, run_id: str):
        return await nightly._production_move(self.rt, run_id, self.canary, PASSED)

    async def next_night(
        self, canary_reply: str, production_reply: str, gate: JudgeGate = TRUSTED
    ) -> str:
        run_id = f"{self.run_id}-n2"
        collected = traffic(
            self.canary_prompt, self.production_prompt, canary_reply, production_reply
        )
        return await nightly.canary_out(self.rt, run_id, StageClock(), collected, gate)

    def run(self, work, *args):
        @flow
        async def a_night():
            return await work(*args)

        return asyncio.run(a_night())

    def canary_label(self):
        return self.hub.labelled(CANARY)

    def prompt_alias(self, alias: str):
        return self.registry.prompt_version_at_alias(
            self.registry.prompt_name("instructions"), alias
        )


def traffic(canary: int, production: int, canary_reply: str, production_reply: str) -> Collected:
    """The next night's traces: 12 from each label since the canary went out, two an older
    prompt version served, one canary trace from before it went out (a clock skew), and
    one canary trace people labelled as passing."""
    now = datetime.now(UTC)
    served, outputs, examples = {}, {}, []

    def trace(trace_id: str, version: int, reply: str, at: datetime) -> None:
        served[trace_id] = (at, {"router": version})
        outputs[trace_id] = reply
        examples.append(Example(trace_id, {"request": f"request {trace_id}"}))

    for i in range(12):
        trace(f"c{i}", canary, canary_reply, now + timedelta(seconds=i))
        trace(f"p{i}", production, production_reply, now + timedelta(seconds=i))
    for i in range(2):
        trace(f"old{i}", 1, BAD, now)
    trace("early", canary, canary_reply, now - timedelta(days=1))
    labelled = [JudgedItem("c0", "request c0", canary_reply, human_pass=True, human_value=True)]
    return Collected(examples, labelled, outputs=outputs, served=served)


def judge_lm() -> ScriptedLM:
    """A judge that passes good replies and fails bad ones."""
    return ScriptedLM(p_first=lambda messages: 0.95 if GOOD in str(messages) else 0.05)


def test_a_passing_night_with_a_canary_share_publishes_the_canary_not_production(tmp_path, harness):
    with FakeLangfusePrompts() as fake:
        world = World(tmp_path, fake)
        move = world.published
        assert (move.action, move.version, move.previous) == (
            PUBLISHED,
            world.canary,
            world.production,
        )
        assert "25% of the traffic" in move.reason
        registry = world.registry
        assert registry.get_alias(MODEL, CANARY) == world.canary
        assert registry.get_alias(MODEL, PRODUCTION) == world.production  # unmoved
        assert world.prompt_alias(CANARY).template == "instructions of n1"
        assert world.prompt_alias(PRODUCTION).template == "instructions of n0"
        canary = world.canary_label()["instructions"]
        assert canary.text == "n1" and canary.config["canary_share"] == 0.25
        assert world.hub.production()["instructions"].text == "n0"
        assert registry.model_version(MODEL, world.canary).tags[DECISION + "decision"] == PUBLISHED
        assert [m["version"] for m in history(registry, MODEL)] == [world.production]
        shown = "\n".join(status_lines(registry, world.rt.settings))
        assert f"Canary: agent v{world.canary}: prompts agent-instructions v2" in shown
        assert "Awaiting approval" not in shown  # it went out already


def test_a_losing_canary_is_rolled_back_by_the_next_night(tmp_path, harness):
    with FakeLangfusePrompts() as fake:
        world = World(tmp_path, fake)
        world.rt._objects["judge_lm"] = lm = judge_lm()
        line = world.run(world.next_night, BAD, GOOD)

        assert line.startswith(f"Canary v{world.canary} lost and was rolled back")
        assert f"production stays v{world.production}" in line
        assert "on 12 canary and 12 production traces" in line  # not the old nor the early
        assert len(lm.choice_calls) == 11 + 12  # c0's label stood in for the judge
        registry = world.registry
        assert registry.get_alias(MODEL, CANARY) is None
        assert world.prompt_alias(CANARY) is None
        assert world.canary_label() == {}
        assert registry.get_alias(MODEL, PRODUCTION) == world.production
        assert world.prompt_alias(PRODUCTION).template == "instructions of n0"
        assert world.hub.production()["instructions"].text == "n0"
        tags = registry.model_version(MODEL, world.canary).tags
        assert tags[DECISION + "decision"] == ROLLED_BACK and tags[DECISION + "by"] == "canary"
        assert [m["version"] for m in history(registry, MODEL)] == [world.production]
        assert f"canary-rolled-back-v{world.canary}" in {r.name for r in registry.recent_runs(20)}


def test_a_winning_canary_is_promoted_by_the_next_night(tmp_path, harness):
    with FakeLangfusePrompts() as fake:
        world = World(tmp_path, fake)
        world.rt._objects["judge_lm"] = judge_lm()
        line = world.run(world.next_night, GOOD, BAD)

        assert line.startswith(f"Canary v{world.canary} won and was promoted to production")
        registry = world.registry
        assert registry.get_alias(MODEL, PRODUCTION) == world.canary
        assert world.prompt_alias(PRODUCTION).template == "instructions of n1"
        assert world.hub.production()["instructions"].version == world.canary_prompt
        assert registry.get_alias(MODEL, CANARY) is None and world.canary_label() == {}
        last = history(registry, MODEL)[-1]
        assert (last["action"], last["version"], last["by"]) == ("promoted", world.canary, "canary")


def test_an_undecided_canary_is_kept_and_the_report_says_so(tmp_path, harness):
    with FakeLangfusePrompts() as fake:
        world = World(tmp_path, fake)
        world.rt._objects["judge_lm"] = judge_lm()
        line = world.run(world.next_night, GOOD, GOOD)

        assert line.startswith(f"Canary v{world.canary} kept")
        assert "it keeps serving its share" in line
        assert world.registry.get_alias(MODEL, CANARY) == world.canary
        assert world.canary_label()["instructions"].version == world.canary_prompt


def test_an_untrusted_judge_neither_promotes_nor_rolls_back_a_canary(tmp_path, harness):
    with FakeLangfusePrompts() as fake:
        world = World(tmp_path, fake)
        world.rt._objects["judge_lm"] = lm = judge_lm()
        weak = Judge({"rubric": "r"}, threshold=0.5, heldout={"kappa": 0.2})
        untrusted = JudgeGate(GateDecision(False, "below the floor", 0.2, 0.5), {}, weak, None)
        line = world.run(world.next_night, BAD, GOOD, untrusted)

        assert line.startswith(f"Canary v{world.canary} kept: only 1 canary and 0 production")
        assert "true labels alone scored them" in line
        assert lm.choice_calls == []
        assert world.registry.get_alias(MODEL, CANARY) == world.canary


def test_traffic_is_split_by_the_prompt_versions_a_trace_recorded():
    at = datetime(2026, 12, 1, tzinfo=UTC)
    steps = (
        TraceRecord("o1", "t1", at, prompt_name="planner", prompt_version=2),
        TraceRecord("o2", "t1", at, type="TOOL"),
    )
    last = TraceRecord("o3", "t1", at, prompt_name="router", prompt_version=5, steps=steps)
    assert last.served_prompts == {"planner": 2, "router": 5}
    served = {
        "t1": (at, last.served_prompts),
        "t2": (at, {"router": 4}),
        "t3": (at, {"router": 3}),  # an older version: neither
        "t4": (at - timedelta(hours=1), {"router": 5}),  # before the canary went out
    }
    assert split_traffic(served, {"router": 5}, {"router": 4}, at) == (["t1"], ["t2"])
