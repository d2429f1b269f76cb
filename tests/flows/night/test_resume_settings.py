"""A resumed night may change how it runs (a timeout) and registers whole, under the
params it first started with; it may not change what it computes: that resume is refused
in one sentence before any stage runs."""

import asyncio
from dataclasses import replace
from fnmatch import fnmatch
from pathlib import Path

import pytest

from flows import nightly
from flows.night.clock import StageClock
from flows.night.failed_night import record_failed_night
from flows.night.night_settings import NEUTRAL, night_settings, result_neutral
from flows.night.registration import register_versions
from flows.night.runtime import Runtime
from flows.production.gate import PromotionDecision
from flows.report.night_report import CANDIDATE
from infra.errors import UserFacingError
from infra.registry.mlflow_registry import Registry, safe_params
from infra.settings import LMSettings, LoraSettings, Settings
from tests.flows.report.test_report import report
from tests.prefect_harness import prefect_harness

PASSED = PromotionDecision(True, "beats production", 0.2, 0.1, 0.3)


def test_a_resume_with_a_longer_timeout_registers_the_whole_night(tmp_path):
    first = Settings(state_dir=tmp_path / "state")
    registry = Registry(first.mlflow)
    rt = Runtime(first, registry=registry)
    night_settings(rt.run_dir("n1"), first)  # the night's first start
    record_failed_night(rt, "n1", StageClock(), {}, RuntimeError("the server went away"))

    longer = Settings(state_dir=tmp_path / "state", lm=LMSettings(timeout_s=120.0))
    resumed = Runtime(longer, registry=registry)
    record_failed_night(resumed, "n1", StageClock(), {}, RuntimeError("it went away again"))
    registered = register_versions(resumed, "n1", replace(report(0.5), promotion=PASSED))

    run = registry.client.get_run(registered.mlflow_run_id)
    assert run.info.status == "FINISHED"
    assert run.data.params["lm.timeout_s"] == "60.0"  # what its first stages ran with
    error = registry.client.download_artifacts(run.info.run_id, "error.txt", str(tmp_path))
    assert "it went away again" in Path(error).read_text()  # the resumed failure, recorded
    assert run.data.tags["flywheel.resumed_with.lm.timeout_s"] == "120.0"
    name = registry.prompt_name("instructions")
    assert registry.prompt_version_at_alias(name, CANDIDATE).version == 1
    assert registry.get_alias("agent", CANDIDATE) == registered.model_version == 1


def test_a_resume_that_changes_results_is_refused_before_any_stage(tmp_path, monkeypatch):
    first = Settings(state_dir=tmp_path / "state")
    night_settings(Runtime(first).run_dir("n1"), first)
    stages = []

    async def night(rt, run_id, clock):
        stages.append(run_id)

    monkeypatch.setattr(nightly, "_night", night)
    changed = Settings(
        state_dir=tmp_path / "state", lm=LMSettings(timeout_s=120.0), lora=LoraSettings(rank=16)
    )
    registry = Registry(changed.mlflow)
    with prefect_harness(), pytest.raises(UserFacingError) as refused:
        asyncio.run(nightly.nightly(run_id="n1", runtime=Runtime(changed, registry=registry)))
    sentence = str(refused.value)
    assert sentence.startswith("Night n1 cannot resume with lora.rank '8' -> '16': ")
    assert "timeout" not in sentence and "\n" not in sentence
    assert stages == [] and registry.recent_runs(5) == []  # no stage, no half night


def test_the_neutral_settings_are_settings_and_what_changes_results_is_not_among_them():
    keys = list(safe_params(Settings(reflection=LMSettings(), judge_lm=LMSettings())))
    for pattern in NEUTRAL:  # one no setting matches is stale: a setting renamed
        assert any(fnmatch(key, pattern) for key in keys), pattern
    assert result_neutral("network.call_attempts") and result_neutral("judge_lm.max_retries")
    changes = ["lm.model", "seed", "lora.rank", "agent_opt.max_concurrency", "registry.model_name"]
    assert not any(result_neutral(key) for key in changes)
