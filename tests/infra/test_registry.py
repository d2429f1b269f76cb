"""The MLflow registry on a real sqlite store; one store for the module (MLflow is slow)."""

import json
import os
from pathlib import Path

import pytest
from pydantic import SecretStr

from infra.settings import Settings

mlflow_registry = pytest.importorskip("infra.registry.mlflow_registry")
Registry, RegistryError = mlflow_registry.Registry, mlflow_registry.RegistryError

SECRET = "sk-test-never-logged-42"


@pytest.fixture(scope="module")
def settings(tmp_path_factory) -> Settings:
    state = tmp_path_factory.mktemp("flywheel") / "state"  # not there yet: Registry creates it
    return Settings(state_dir=state, lm={"api_key": SECRET}, judge_lm={"api_key": SECRET})


@pytest.fixture(scope="module")
def registry(settings) -> Registry:
    return Registry(settings.mlflow)


@pytest.fixture(scope="module")
def adapter(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("adapter")
    (folder / "adapter_config.json").write_text(json.dumps({"r": 8, "peft_type": "LORA"}))
    (folder / "adapter_model.safetensors").write_bytes(b"\0" * 64)
    return folder


def test_store_lives_in_the_state_folder(registry, settings):
    assert (settings.state_dir / "mlflow.db").is_file()
    experiment = registry.client.get_experiment(registry.experiment_id)
    assert experiment.artifact_location == settings.artifact_location


def test_two_prompt_versions_and_an_alias(registry):
    name = registry.prompt_name("system")
    assert name == "agent-system"
    first = registry.register_prompt(name, "Route: {{text}}", "seed")
    second = registry.register_prompt(name, "Route carefully: {{text}}", "gepa", {"night": "1"})
    assert second == first + 1
    registry.set_prompt_alias(name, "candidate", first)
    assert registry.load_prompt(f"prompts:/{name}@candidate") == "Route: {{text}}"
    registry.set_prompt_alias(name, "candidate", second)
    assert registry.load_prompt(f"prompts:/{name}@candidate") == "Route carefully: {{text}}"
    assert registry.load_prompt(f"prompts:/{name}/{first}") == "Route: {{text}}"


def test_prompt_tags_can_be_reused_for_a_model_version(registry):
    tags = {"flywheel.run_id": "night-1"}
    registry.register_prompt("agent-reuse", "text", "seed", tags)
    assert tags == {"flywheel.run_id": "night-1"}  # MLflow's prompt marker did not leak in
    with registry.start_run("reuse"):
        version = registry.register_model_version("agent-reuse-model", None, [], {"x": 1.0}, tags)
    assert version >= 1
    assert registry.prompt_at_alias("agent-reuse", "production") is None


def test_prompt_names_outside_mlflows_charset_are_refused(registry):
    with pytest.raises(RegistryError, match="valid MLflow prompt name"):
        registry.register_prompt("agent/system prompt", "x")


def test_model_versions_with_and_without_adapter(registry, adapter):
    import mlflow

    name = registry.prompt_name("rubric")
    prompt = registry.register_prompt(name, "Is {{answer}} right?")
    uri = f"prompts:/{name}/{prompt}"
    assert registry.get_alias("agent", "candidate") is None

    with registry.start_run("night-1", {"stage": "test"}) as run:
        with_adapter = registry.register_model_version(
            "agent", adapter, [uri], {"heldout_accuracy": 0.75}, {"round": "1"}
        )
        prompt_only = registry.register_model_version(
            "agent", None, [uri], {"heldout_accuracy": 0.7}
        )

    assert prompt_only == with_adapter + 1
    assert registry.get_alias("agent", "candidate") == prompt_only
    assert registry.get_alias("agent", "production") is None

    version = registry.client.get_model_version("agent", str(with_adapter))
    assert version.run_id == run.info.run_id and version.tags["round"] == "1"
    logged = registry.client.get_logged_model(version.source.removeprefix("models:/"))
    assert {m.key: m.value for m in logged.metrics} == {"heldout_accuracy": 0.75}
    assert json.loads(logged.tags["mlflow.linkedPrompts"]) == [{"name": name, "version": "1"}]

    with registry.fluent():  # the registry points MLflow at its store for the block only
        bundle = mlflow.pyfunc.load_model(f"models:/agent/{with_adapter}")
        assert bundle.predict(["rubric"]) == ["Is {{answer}} right?"]
        assert (bundle.unwrap_python_model().adapter_dir / "adapter_config.json").is_file()
        bundle = mlflow.pyfunc.load_model("models:/agent@candidate")
    assert bundle.unwrap_python_model().adapter_dir is None


def test_metrics_params_and_artifacts_read_back(registry):
    with registry.start_run("metrics") as run:
        registry.log_metrics({"agreement": 0.5}, step=0)
        registry.log_metrics({"agreement": 0.8}, step=1)
        registry.log_dict({"a": 1}, "report.json")
        registry.log_text("hello", "notes.txt")
    client = registry.client
    history = client.get_metric_history(run.info.run_id, "agreement")
    assert [(m.step, m.value) for m in history] == [(0, 0.5), (1, 0.8)]
    files = {f.path for f in client.list_artifacts(run.info.run_id)}
    assert files == {"report.json", "notes.txt"}


def test_secrets_never_reach_mlflow(registry, settings):
    params = mlflow_registry.safe_params(settings)
    assert params["lm.model"] == "smollm2-135m-instruct" and "lm.api_key" not in params
    assert params["judge_lm.model"] == "smollm2-135m-instruct"
    assert "judge_lm.api_key" not in params
    with registry.start_run("params") as run:
        registry.log_params(params)
        with pytest.raises(ValueError, match="lm.api_key"):
            registry.log_params({"lm.api_key": SecretStr(SECRET)})
    logged = registry.client.get_run(run.info.run_id).data.params
    assert logged == params
    assert SECRET not in json.dumps(logged)


def test_credentials_inside_urls_are_masked_in_params() -> None:
    settings = Settings(
        registry={"tracking_uri": "http://alice:hunter2@mlflow.internal:5000"},
        lm={"base_url": "https://llm.example.com/v1?api_key=abc123secret&region=eu"},
    )
    params = mlflow_registry.safe_params(settings)
    assert params["registry.tracking_uri"] == (
        "http://[REDACTED:url_password]@mlflow.internal:5000"
    )
    assert (
        params["lm.base_url"]
        == "https://llm.example.com/v1?api_key=[REDACTED:url_secret]&region=eu"
    )
    assert "hunter2" not in json.dumps(params) and "abc123secret" not in json.dumps(params)


def test_logging_needs_a_run(registry, tmp_path):
    with pytest.raises(RegistryError, match="start_run"):
        registry.log_metrics({"x": 1.0})
    with registry.start_run("bad adapter"), pytest.raises(RegistryError, match="adapter_config"):
        registry.register_model_version("agent", tmp_path, [], {})


def test_unusable_store_is_one_sentence(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(RegistryError, match="FLYWHEEL_STATE_DIR"):
        Registry(Settings(state_dir=blocker / "state").mlflow)


def test_prompt_version_at_alias_carries_its_tags(registry):
    name = registry.prompt_name("judge-rubric")
    assert registry.prompt_version_at_alias(name, "judge-production") is None
    version = registry.register_prompt(name, "Judge: {{reply}}", "n1", {"threshold": "0.42"})
    registry.set_prompt_alias(name, "judge-production", version)
    found = registry.prompt_version_at_alias(name, "judge-production")
    assert (found.name, found.version, found.template) == (name, version, "Judge: {{reply}}")
    assert found.tags == {"threshold": "0.42"}


def test_a_closed_run_takes_later_metrics(registry):
    with registry.start_run("night") as run:
        registry.log_metrics({"a": 1.0})
    with registry.reopen_run(run.info.run_id):
        registry.log_metrics({"scores_written": 3.0})
        registry.log_text("later", "report.md")
    data = registry.client.get_run(run.info.run_id).data
    assert data.metrics == {"a": 1.0, "scores_written": 3.0}


def test_two_registries_in_one_process_keep_to_their_own_stores(tmp_path, monkeypatch):
    import mlflow

    from infra.settings import MlflowSettings

    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "7")  # the user's, for their own MLflow
    monkeypatch.delenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", raising=False)
    before = (dict(os.environ), mlflow.get_tracking_uri(), mlflow.get_registry_uri())

    one = Registry(Settings(state_dir=tmp_path / "one").mlflow)
    two = Registry(
        MlflowSettings(
            tracking_uri=f"sqlite:///{tmp_path / 'two' / 'mlflow.db'}",
            artifact_location=(tmp_path / "two" / "mlartifacts").as_uri(),
            experiment="elsewhere",
            prompt_name="other",
            timeout_s=9,
            max_retries=1,
        )
    )
    assert (dict(os.environ), mlflow.get_tracking_uri(), mlflow.get_registry_uri()) == before

    with one.start_run("night-one") as run:
        assert os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "60"  # one's, for its block
        assert mlflow.get_tracking_uri() == one.tracking_uri
        # the other registry in the middle of one's run: its own store, then back to one's
        two_prompt = two.register_prompt(two.prompt_name("system"), "two's text")
        assert two.load_prompt(f"prompts:/other-system/{two_prompt}") == "two's text"
        assert mlflow.get_tracking_uri() == one.tracking_uri
        one.log_metrics({"x": 1.0})
        one.register_prompt(one.prompt_name("system"), "one's text")
        one.register_model_version("agent", None, ["prompts:/agent-system/1"], {"gain": 0.5})
    with two.start_run("night-two"):
        assert os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "9"
        assert os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == "1"
        two.log_metrics({"x": 2.0})
        two.log_text("two's notes", "notes.txt")

    assert (dict(os.environ), mlflow.get_tracking_uri(), mlflow.get_registry_uri()) == before
    assert [r.name for r in one.recent_runs(5)] == ["night-one"]
    assert [r.name for r in two.recent_runs(5)] == ["night-two"]
    assert one.client.get_run(run.info.run_id).data.metrics == {"x": 1.0, "gain": 0.5}
    assert one.load_prompt("prompts:/agent-system/1") == "one's text"
    assert one.get_alias("agent", "candidate") == 1 and two.get_alias("agent", "candidate") is None
    assert two.client.search_registered_models() == []  # prompts only, no model
    assert (tmp_path / "one" / "mlflow.db").is_file() and (tmp_path / "two" / "mlflow.db").is_file()
    assert two.client.get_experiment(two.experiment_id).name == "elsewhere"


def test_the_whole_settings_are_refused_with_the_way_to_build_one():
    with pytest.raises(TypeError, match=r"Registry\(settings.mlflow\)"):
        Registry(Settings())


def test_recent_nights_are_found_past_many_newer_runs_of_other_names(tmp_path):
    registry = Registry(Settings(state_dir=tmp_path / "state").mlflow)
    with registry.start_run("nightly-20261205T020000Z"):
        pass
    for step in range(6):  # a night's training curves, and moves, come after it
        with registry.start_run(f"lora-round-step{step}"):
            pass
    (night,) = registry.recent_runs(1, name_prefix="nightly-")
    assert night.name == "nightly-20261205T020000Z"
    assert len(registry.recent_runs(3)) == 3  # no prefix: the newest runs, any name


def test_a_dataset_on_a_server_s_artifact_proxy_is_named_by_its_http_address():
    # MLflow has no dataset source for `mlflow-artifacts:`; the address carries no password
    address = mlflow_registry._dataset_uri(
        "mlflow-artifacts:/3/abc/artifacts/training/sft.jsonl", "https://bob:pw@mlflow.lan:5000"
    )
    assert address == (
        "https://mlflow.lan:5000/api/2.0/mlflow-artifacts/artifacts/3/abc/artifacts/training/sft.jsonl"
    )
    local = "file:///state/mlartifacts/1/abc/artifacts/training/sft.jsonl"
    assert mlflow_registry._dataset_uri(local, "sqlite:///state/mlflow.db") == local


def test_an_alias_taken_off_twice_is_no_error(registry):
    version = registry.register_prompt("agent-withdrawn", "text")
    registry.set_prompt_alias("agent-withdrawn", "canary", version)
    with registry.start_run("withdrawn"):
        model = registry.register_model_version("withdrawn", None, [], {}, {}, alias="canary")
    for _ in range(2):  # a rollback redone after a cut
        registry.delete_prompt_alias("agent-withdrawn", "canary")
        registry.delete_model_alias("withdrawn", "canary")
    assert registry.prompt_version_at_alias("agent-withdrawn", "canary") is None
    assert registry.get_alias("withdrawn", "canary") is None and model == 1
