"""Promotion, refusal, rollback and their record, on a real sqlite MLflow."""

import asyncio
import json
from dataclasses import replace

import pytest

from flows.cli import main
from flows.production import serving
from flows.production.criteria_gate import CriterionEvidence
from flows.production.gate import Evidence
from flows.production.promotion import (
    DECISION,
    HISTORY_TAG,
    MANAGED_TAG,
    PRODUCTION,
    PROMPTS_TAG,
    history,
    hub_pages,
    hub_versions,
    log_evidence,
    publish_managed,
    rollback,
)
from flows.report.status import status_lines
from infra.registry.mlflow_registry import Registry
from infra.settings import PromotionSettings, Settings, TraceSettings
from infra.traces.prompt_hub import PromptHub
from judges.pairwise_gate import PairwiseEvidence
from tests.fake_langfuse_prompts import PROJECT, FakeLangfusePrompts
from tests.prefect_harness import prefect_harness

MODEL = "agent"
CFG = PromotionSettings(resamples=300)
IDS = [f"e{i}" for i in range(30)]


def promote(*args, **kwargs):
    """The one door to production, with no serving server: the registry (and hub) alone."""
    return asyncio.run(serving.promote(None, *args, **kwargs))


def gain_over(baseline: int | None, wins: int) -> Evidence:
    """`wins` examples go from wrong to right, nothing else moves."""
    old = dict.fromkeys(IDS, 0.0)
    new = {i: 1.0 if n < wins else 0.0 for n, i in enumerate(IDS)}
    return Evidence(new, old, by_labels=True, production_version=baseline)


def night(
    registry: Registry, name: str, evidence: Evidence, alias: str | None = "candidate"
) -> int:
    """What a night registers: prompt versions, a model version, the evidence in its run."""
    with registry.start_run(name):
        log_evidence(registry, evidence)
        prompt = registry.prompt_name("instructions")
        version = registry.register_prompt(prompt, f"instructions of {name}")
        return registry.register_model_version(
            MODEL,
            None,
            [f"prompts:/{prompt}/{version}"],
            {},
            {PROMPTS_TAG: json.dumps({prompt: version})},
            alias=alias,
        )


@pytest.fixture(scope="module")
def registry(tmp_path_factory) -> Registry:
    return Registry(Settings(state_dir=tmp_path_factory.mktemp("promotion")).mlflow)


def production_prompt(registry: Registry) -> str | None:
    return registry.prompt_at_alias(registry.prompt_name("instructions"), PRODUCTION)


def test_promote_refuse_repeat_and_roll_back(registry):
    v1 = night(registry, "n1", gain_over(None, 12))
    first = promote(registry, MODEL, None, CFG, "ada")  # the candidate
    assert (first.action, first.version, first.previous) == ("promoted", v1, None)
    assert registry.get_alias(MODEL, PRODUCTION) == v1
    assert production_prompt(registry) == "instructions of n1"
    tags = registry.model_version(MODEL, v1).tags
    assert tags[DECISION + "decision"] == "promoted" and tags[DECISION + "by"] == "ada"
    assert "over the seed prompts" in tags[DECISION + "reason"]

    again = promote(registry, MODEL, v1, CFG, "ada")
    assert again.action == "unchanged" and len(history(registry, MODEL)) == 1

    v2 = night(registry, "n2", gain_over(v1, 1))  # one lucky example
    refused = promote(registry, MODEL, v2, CFG, "bob")
    assert refused.action == "refused" and "does not exclude zero" in refused.reason
    assert registry.get_alias(MODEL, PRODUCTION) == v1
    assert registry.model_version(MODEL, v2).tags[DECISION + "decision"] == "refused"

    v3 = night(registry, "n3", gain_over(v1, 10))
    v4 = night(registry, "n4", gain_over(v1, 10))  # measured against v1 too
    assert promote(registry, MODEL, v3, CFG, "cy").action == "promoted"
    stale = promote(registry, MODEL, v4, CFG, "cy")
    assert stale.action == "refused"
    assert f"measured against v{v1}, but production is v{v3} now" in stale.reason
    assert production_prompt(registry) == "instructions of n3"

    back = rollback(registry, MODEL, "dee")
    assert (back.action, back.version, back.previous) == ("rolled back", v1, v3)
    assert registry.get_alias(MODEL, PRODUCTION) == v1
    assert production_prompt(registry) == "instructions of n1"
    assert rollback(registry, MODEL, "dee").action == "unchanged"  # nothing before v1
    moves = [(m["action"], m["version"]) for m in history(registry, MODEL)]
    assert moves == [("promoted", v1), ("promoted", v3), ("rolled back", v1)]
    assert json.loads(registry.model_tag(MODEL, HISTORY_TAG))[-1]["by"] == "dee"
    runs = {r.name for r in registry.recent_runs(20)}
    assert {f"promoted-v{v1}", f"refused-v{v2}", f"rolled-back-v{v1}"} <= runs

    text = "\n".join(status_lines(registry, Settings()))
    assert f"Production: agent v{v1}: prompts agent-instructions v1, no LoRA adapter" in text
    assert f"rolled back v{v1} by dee" in text
    assert f"Candidate: agent v{v4}" in text  # the newest night's version, not promoted


def test_the_command_line_records_each_move_as_a_flow_run(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FLYWHEEL_STATE_DIR", str(tmp_path / "state"))
    registry = Registry(Settings().mlflow)
    night(registry, "n1", gain_over(None, 15))
    with prefect_harness():
        assert main(["promote", "--by", "ops"]) == 0
        assert main(["promote", "1", "--by", "ops"]) == 0  # idempotent
        assert main(["rollback", "--by", "ops"]) == 0  # nothing before: unchanged
        night(registry, "n2", gain_over(1, 1))  # one lucky example
        assert main(["promote", "2", "--by", "ops"]) == 4  # GATE_REFUSED
        artifacts = asyncio.run(_promotion_artifacts())
    out = capsys.readouterr().out
    assert "promoted v1 (production was none; by ops)" in out
    assert "unchanged v1" in out and "no earlier production version" in out
    assert any("promoted v1" in text for text in artifacts)
    # the move's record links the version production now holds
    assert any("#/models/agent/versions/1)" in text for text in artifacts)
    assert main(["status"]) == 0
    assert "Production: agent v1" in capsys.readouterr().out


async def _promotion_artifacts() -> list[str]:
    from prefect import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    async with get_client() as client:
        found = await client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["promotion"]))
        )
    return [a.data for a in found]


def test_the_langfuse_production_label_moves_with_production(tmp_path, monkeypatch):
    with FakeLangfusePrompts() as fake:
        monkeypatch.setenv("LANGFUSE_HOST", fake.host)  # the UI is where the API is
        fake.store.create({"name": "router", "prompt": "seed text", "labels": ["production"]})
        api = fake.sdk_api()
        hub = PromptHub(TraceSettings(managed_prompts={"instructions": "router"}), api=api)
        registry = Registry(Settings(state_dir=tmp_path).mlflow)

        v1 = night(registry, "n1", gain_over(None, 12))
        publish_managed(
            registry, hub, MODEL, v1, {"instructions": "instructions of n1"}, ["candidate"]
        )
        assert hub.production()["instructions"].text == "seed text"  # a candidate only
        assert promote(registry, MODEL, v1, CFG, "ada", hub=hub).action == "promoted"
        assert hub.production()["instructions"].text == "instructions of n1"

        v2 = night(registry, "n2", gain_over(v1, 12))  # registered while no hub was set
        assert promote(registry, MODEL, v2, CFG, "ada", hub=hub).action == "promoted"
        assert hub.production()["instructions"].text == "instructions of n2"  # published now
        newest = fake.store.prompts["router"][-1]
        assert newest["commitMessage"] == f"flywheel: MLflow model {MODEL} v{v2}"
        tags = registry.model_version(MODEL, v2).tags
        assert json.loads(tags[MANAGED_TAG]) == {"router": newest["version"]}
        page = f"{fake.host}/project/{PROJECT['id']}/prompts/router?version={newest['version']}"
        assert hub_pages(hub, hub_versions(tags)) == {f"router v{newest['version']}": page}

        assert rollback(registry, MODEL, "ada", hub).action == "rolled back"
        assert hub.production()["instructions"].text == "instructions of n1"


def test_a_tool_description_goes_into_its_prompts_config_not_a_prompt_of_its_own(tmp_path):
    with FakeLangfusePrompts() as fake:
        chat = [{"role": "system", "content": "seed"}, {"role": "user", "content": "{{request}}"}]
        fake.store.create(
            {"name": "booker", "type": "chat", "labels": ["production"], "prompt": chat,
             "config": {"temperature": 0}}
        )  # fmt: skip
        hub = PromptHub(TraceSettings(source="langfuse"), api=fake.sdk_api(), replayed={"booker"})
        registry = Registry(Settings(state_dir=tmp_path).mlflow)
        v1 = night(registry, "n1", gain_over(None, 12))
        candidate = {
            "booker": "Look slots up first.",
            "booker.tools.find_slot": "Free slots of a weekday",
        }
        made = publish_managed(
            registry, hub, MODEL, v1, candidate, ["candidate"], served="agent-v1"
        )
        assert set(made) == {"booker"} and set(fake.store.prompts) == {"booker"}
        newest = fake.store.prompts["booker"][-1]
        assert newest["config"] == {
            "temperature": 0,
            "model": "agent-v1",
            "tool_descriptions": {"find_slot": "Free slots of a weekday"},
        }
        assert newest["prompt"][0] == {"role": "system", "content": "Look slots up first."}


def test_a_fixed_placeholder_goes_into_its_prompts_config_and_the_placeholder_stays(tmp_path):
    with FakeLangfusePrompts() as fake:
        chat = [
            {"role": "system", "content": "seed"},
            {"type": "placeholder", "name": "examples"},
            {"role": "user", "content": "{{request}}"},
        ]
        fake.store.create(
            {"name": "booker", "type": "chat", "labels": ["production"], "prompt": chat}
        )
        hub = PromptHub(TraceSettings(source="langfuse"), api=fake.sdk_api(), replayed={"booker"})
        assert hub.production()["booker"].placeholders() == ["examples"]
        registry = Registry(Settings(state_dir=tmp_path).mlflow)
        v1 = night(registry, "n1", gain_over(None, 12))
        candidate = {
            "booker": "Look slots up first.",
            "booker.placeholders.examples": "user: Book Monday.\n\nassistant: Booked Monday 9:00.",
        }
        made = publish_managed(registry, hub, MODEL, v1, candidate, ["candidate"])
        assert set(made) == {"booker"} and set(fake.store.prompts) == {"booker"}
        newest = fake.store.prompts["booker"][-1]
        assert newest["config"]["placeholders"] == {
            "examples": [
                {"role": "user", "content": "Book Monday."},
                {"role": "assistant", "content": "Booked Monday 9:00."},
            ]
        }
        assert newest["prompt"][0] == {"role": "system", "content": "Look slots up first."}
        assert {"type": "placeholder", "name": "examples"} in newest["prompt"]


def test_a_file_component_goes_into_the_config_of_the_prompts_that_use_its_variable(tmp_path):
    with FakeLangfusePrompts() as fake:
        uses = [
            {"role": "system", "content": "Plan.\n{{skill}}"},
            {"role": "user", "content": "{{q}}"},
        ]
        fake.store.create(
            {"name": "planner", "type": "chat", "labels": ["production"], "prompt": uses}
        )
        fake.store.create(
            {"name": "writer", "type": "text", "labels": ["production"], "prompt": "{{q}}"}
        )
        hub = PromptHub(
            TraceSettings(source="langfuse"), api=fake.sdk_api(), replayed={"planner", "writer"}
        )
        registry = Registry(Settings(state_dir=tmp_path).mlflow)
        v1 = night(registry, "n1", gain_over(None, 12))
        candidate = {"planner": "Plan.\n{{skill}}", "writer": "{{q}}!", "files.skill": "Walk."}
        made = publish_managed(registry, hub, MODEL, v1, candidate, ["candidate"])
        assert set(made) == {"planner", "writer"}  # the file is no prompt of its own
        assert fake.store.prompts["planner"][-1]["config"] == {"files": {"skill": "Walk."}}
        assert fake.store.prompts["writer"][-1]["config"] == {}


def test_promote_decides_on_the_criteria_and_the_pairwise_comparison_the_night_kept(tmp_path):
    """Evidence goes to its run as JSON: its records come back as records, so `promote`
    refuses a version whose criterion fell as the night's gate did."""
    registry = Registry(Settings(state_dir=tmp_path).mlflow)
    polite = CriterionEvidence(
        "polite", dict.fromkeys(IDS, 0.5), dict.fromkeys(IDS, 0.9), True, 0.05
    )
    pairwise = PairwiseEvidence(30, 0.8, 0.7, 0.9, 0.1, 30)
    dropped = replace(gain_over(None, 12), criteria=(polite,), pairwise=pairwise)
    version = night(registry, "n1", dropped)
    refused = promote(registry, MODEL, version, CFG, "ada")
    assert refused.action == "refused"
    assert "criterion polite fell -0.400, beyond its" in refused.reason
    assert "pairwise win rate 0.800 [0.700, 0.900]" in refused.reason
    assert registry.get_alias(MODEL, PRODUCTION) is None
