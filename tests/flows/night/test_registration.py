"""Registration survives a crash midway: the resumed night registers nothing twice and
moves its aliases only once every version exists."""

from dataclasses import replace

import pytest

from flows.night.registration import register_versions
from flows.night.runtime import Runtime
from flows.production.gate import PromotionDecision
from flows.report.night_report import CANDIDATE
from infra.registry.mlflow_registry import Registry
from infra.settings import Settings, TraceSettings
from infra.traces.prompt_hub import PromptHub
from tests.fake_langfuse_prompts import PROJECT, FakeLangfusePrompts
from tests.flows.report.test_report import report

PASSED = PromotionDecision(True, "beats production", 0.2, 0.1, 0.3)


class Crash(RuntimeError):
    pass


def test_a_night_killed_while_registering_resumes_without_duplicates(tmp_path, monkeypatch):
    settings = Settings(state_dir=tmp_path / "state")
    registry = Registry(settings.mlflow)
    rt = Runtime(settings, registry=registry)
    night = replace(report(0.5), promotion=PASSED)
    night.steps[0].prompt.curve = [(10, 0.2), (30, 0.4)]
    register_model = Registry.register_model_version

    def crash(*args, **kwargs):
        raise Crash("killed between the prompt versions and the model version")

    monkeypatch.setattr(Registry, "register_model_version", crash)
    with pytest.raises(Crash):
        register_versions(rt, "n1", night)
    name = registry.prompt_name("instructions")
    assert registry.prompt_version_at_alias(name, CANDIDATE) is None  # no alias moved early
    (crashed,) = registry.client.search_runs([registry.experiment_id])
    assert crashed.info.status == "FAILED"

    monkeypatch.setattr(Registry, "register_model_version", register_model)
    first = register_versions(rt, "n1", night)
    again = register_versions(rt, "n1", night)  # a resume after it all went through

    assert first.mlflow_run_id == again.mlflow_run_id == crashed.info.run_id
    assert registry.client.get_run(first.mlflow_run_id).info.status == "FINISHED"
    versions = list(registry.client.search_prompt_versions(name))
    assert [int(v.version) for v in versions] == [1]
    assert first.prompt_versions == again.prompt_versions == {name: 1}
    assert first.model_version == again.model_version == 1
    assert len(registry.client.search_model_versions("name = 'agent'")) == 1
    assert registry.get_alias("agent", CANDIDATE) == 1
    assert registry.prompt_version_at_alias(name, CANDIDATE).version == 1
    curve = registry.client.get_metric_history(first.mlflow_run_id, "agent_step1_best_val_score")
    assert len(curve) == len(night.steps[0].prompt.curve)  # not logged twice


def test_a_new_text_for_the_same_night_is_a_new_version(tmp_path):
    settings = Settings(state_dir=tmp_path / "state")
    rt = Runtime(settings, registry=Registry(settings.mlflow))
    night = report(0.5)
    register_versions(rt, "n1", night)
    other = replace(night, prompts={"instructions": "changed"})
    registered = register_versions(rt, "n2", other)
    assert registered.prompt_versions == {"agent-instructions": 2}
    assert registered.model_version == 2


KILLED_CHILD = """
import os, signal, sys
from dataclasses import replace
from flows.production.gate import PromotionDecision
from flows.night.registration import register_versions
from flows.night.runtime import Runtime
from infra.registry.mlflow_registry import Registry
from infra.settings import Settings
from tests.flows.report.test_report import report

settings = Settings(state_dir=sys.argv[1])
night = replace(report(0.5), promotion=PromotionDecision(True, "beats production", 0.2, 0.1, 0.3))
Registry.register_model_version = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)
register_versions(Runtime(settings, registry=Registry(settings.mlflow)), "n1", night)
"""


@pytest.mark.slow  # a second Python process with MLflow
def test_a_night_sigkilled_while_registering_resumes_its_run(tmp_path):
    import subprocess
    import sys

    state = tmp_path / "state"
    child = subprocess.run([sys.executable, "-c", KILLED_CHILD, str(state)], timeout=300)
    assert child.returncode == -9  # killed between the prompt versions and the model version
    settings = Settings(state_dir=state)
    registry = Registry(settings.mlflow)
    (left,) = registry.client.search_runs([registry.experiment_id])
    assert left.info.status == "RUNNING"  # nothing could end it
    name = registry.prompt_name("instructions")
    assert registry.prompt_version_at_alias(name, CANDIDATE) is None

    night = replace(report(0.5), promotion=PASSED)
    resumed = register_versions(Runtime(settings, registry=registry), "n1", night)
    assert resumed.mlflow_run_id == left.info.run_id
    assert registry.client.get_run(left.info.run_id).info.status == "FINISHED"
    assert [int(v.version) for v in registry.client.search_prompt_versions(name)] == [1]
    assert resumed.model_version == 1 and registry.get_alias("agent", CANDIDATE) == 1


def test_each_weight_step_s_training_sets_are_the_run_s_datasets_with_provenance(tmp_path):
    settings = Settings(state_dir=tmp_path / "state")
    registry = Registry(settings.mlflow)
    rt = Runtime(settings, registry=registry)
    sets = tmp_path / "n1" / "training"
    sets.mkdir(parents=True)
    (sets / "sft.jsonl").write_text('{"prompt": [], "completion": []}\n')
    (sets / "dpo.jsonl").write_text('{"prompt": [], "chosen": [], "rejected": []}\n')
    night = report(0.5)
    weights = night.steps[1]
    weights.lora = replace(
        weights.lora,
        training_sets=(str(sets / "sft.jsonl"), str(sets / "dpo.jsonl")),
        base_adapter="production-v3",
        trained_from="/runs/n0/production",
    )
    weights.decision = replace(weights.decision, kept=True)
    window = {"since": "2026-12-01T00:00:00+00:00", "fetched_at": "2026-12-02T01:00:00+00:00"}
    registered = register_versions(rt, "n1", replace(night, trace_window=window))
    inputs = registry.client.get_run(registered.mlflow_run_id).inputs.dataset_inputs
    assert sorted(i.dataset.name for i in inputs) == ["lora-step2-dpo", "lora-step2-sft"]
    tags = {t.key: t.value for t in inputs[0].tags}
    assert tags["flywheel.prompts"] == '{"agent-instructions": 1}'  # the candidate's
    assert tags["flywheel.step"] == "2" and tags["flywheel.fst"] == "false"
    assert tags["flywheel.base_adapter"] == "production-v3"
    assert tags["flywheel.judge_version"] == night.gate.judge.label
    assert tags["flywheel.traces_since"] == window["since"]
    assert tags["mlflow.data.context"] == "training"
    artifacts = {
        a.path
        for folder in ("training/lora-step2-sft", "training/lora-step2-dpo")
        for a in registry.client.list_artifacts(registered.mlflow_run_id, folder)
    }
    assert artifacts == {"training/lora-step2-sft/sft.jsonl", "training/lora-step2-dpo/dpo.jsonl"}
    digests = {i.dataset.name: i.dataset.digest for i in inputs}
    assert digests["lora-step2-sft"] != digests["lora-step2-dpo"]  # the content's hash
    # the model version's lineage: where it started and what each step did
    version = registry.client.get_model_version("agent", str(registered.model_version))
    assert version.tags["flywheel.lineage.steps"] == "1:p kept, 2:w kept"
    assert version.tags["flywheel.lineage.adapter_from"] == "/runs/n0/production"
    assert version.tags["flywheel.lineage.production_version"] == "none"


def test_a_passing_night_publishes_its_prompts_where_the_agent_reads_them_and_links_them(
    tmp_path, monkeypatch
):
    with FakeLangfusePrompts() as fake:
        monkeypatch.setenv("LANGFUSE_HOST", fake.host)
        fake.store.create({"name": "router", "prompt": "seed", "labels": ["production"]})
        api = fake.sdk_api()
        settings = Settings(state_dir=tmp_path / "state")
        rt = Runtime(settings, registry=Registry(settings.mlflow))
        managed = TraceSettings(managed_prompts={"instructions": "router"})
        rt._objects["prompt_hub"] = PromptHub(managed, api=api)

        refused = register_versions(rt, "n1", report(0.5))  # no candidate: nothing published
        assert refused.hub_prompts == {} and len(fake.store.prompts["router"]) == 1

        registered = register_versions(rt, "n2", replace(report(0.6), promotion=PASSED))
    assert fake.store.prompts["router"][1]["labels"] == ["candidate", "latest"]
    page = f"{fake.host}/project/{PROJECT['id']}/prompts/router?version=2"
    assert registered.hub_prompts == {"router v2": page}


def test_with_a_canary_share_the_published_candidate_carries_it_in_its_config(tmp_path):
    with FakeLangfusePrompts() as fake:
        fake.store.create({"name": "router", "prompt": "seed", "labels": ["production"]})
        settings = Settings(state_dir=tmp_path / "state", promotion={"canary_share": 0.1})
        rt = Runtime(settings, registry=Registry(settings.mlflow))
        managed = TraceSettings(managed_prompts={"instructions": "router"})
        rt._objects["prompt_hub"] = PromptHub(managed, api=fake.sdk_api())
        register_versions(rt, "n1", replace(report(0.6), promotion=PASSED))
    # the canary label goes on this very version, whose config Langfuse never changes
    assert fake.store.prompts["router"][1]["config"] == {"canary_share": 0.1}
