"""The registry over HTTP, against a real `mlflow server` process rather than a sqlite
file: a night's registration with its adapter and training sets uploaded through the
server's artifact proxy, a registration killed midway and resumed, promotion and
rollback, and a server behind basic authentication reached with MLflow's credentials.

One server for the module; each test has its own experiment, prompt and model names, so
that none sees another's versions.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from flows.night.registration import register_versions
from flows.night.runtime import Runtime
from flows.production import serving
from flows.production.gate import PromotionDecision
from flows.production.promotion import PRODUCTION, history
from flows.report.night_report import CANDIDATE, NightReport
from infra.registry.mlflow_registry import Registry, RegistryError
from infra.settings import NetworkSettings, RegistrySettings, Settings
from tests.fake_openai import free_port, on_loopback
from tests.flows.production.test_promotion import CFG, gain_over, night, promote
from tests.flows.report.test_report import report

pytestmark = pytest.mark.slow  # a server process, and MLflow's model logging per night

MLFLOW = Path(sys.executable).with_name("mlflow")
PASSED = PromotionDecision(True, "beats production", 0.2, 0.1, 0.3)


class Killed(RuntimeError):
    pass


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[str]:
    """A tracking server that proxies its artifacts (what a shared deployment runs), on a
    free loopback port; its URL once /health answers."""
    if not MLFLOW.exists():
        pytest.skip(f"no `mlflow` executable beside {sys.executable}: cannot start a server")
    root = tmp_path_factory.mktemp("mlflow-server")
    port = free_port()
    command = [
        *(str(MLFLOW), "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"),
        *("--backend-store-uri", f"sqlite:///{root}/m.db"),
        *("--artifacts-destination", str(root / "artifacts"), "--serve-artifacts"),
    ]
    log = (root / "server.log").open("w")
    # a session of its own: the server's workers go down with it
    process = subprocess.Popen(
        command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, process, root / "server.log")
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


def _wait_healthy(url: str, process: subprocess.Popen, log: Path, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"mlflow server exited with {process.returncode}:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    pytest.fail(f"mlflow server did not answer /health in {timeout_s:.0f} s:\n{log.read_text()}")


def settings_on(uri: str, state: Path, name: str) -> Settings:
    """Settings whose registry is the server at `uri`, under names of their own."""
    names = RegistrySettings(tracking_uri=uri, experiment=name, prompt_name=name, model_name=name)
    # no retries: a refused request (401) fails at once rather than after MLflow's backoff
    return Settings(state_dir=state, registry=names, network=NetworkSettings(mlflow_max_retries=0))


def with_adapter_and_training_set(night_report: NightReport, folder: Path) -> NightReport:
    """The night's weight step kept, with an adapter and one training set on disk."""
    adapter, sets = folder / "adapter", folder / "training"
    adapter.mkdir(parents=True)
    sets.mkdir(parents=True)
    (adapter / "adapter_config.json").write_text('{"r": 8}')
    (adapter / "adapter_model.safetensors").write_bytes(bytes(range(256)) * 64)
    (sets / "sft.jsonl").write_text('{"prompt": [], "completion": []}\n')
    weights = night_report.steps[1]
    weights.lora = replace(weights.lora, training_sets=(str(sets / "sft.jsonl"),))
    weights.decision = replace(weights.decision, kept=True)
    return replace(night_report, adapter_path=str(adapter))


def test_a_night_registers_its_adapter_and_training_sets_through_the_server(server, tmp_path):
    settings = settings_on(server, tmp_path / "state", "uploaded")
    registry = Registry(settings.mlflow)
    night_report = with_adapter_and_training_set(replace(report(0.5), promotion=PASSED), tmp_path)

    registered = register_versions(Runtime(settings, registry=registry), "n1", night_report)

    assert registered.tracking_uri == server
    assert registered.with_adapter and registered.candidate
    assert registry.get_alias("uploaded", CANDIDATE) == registered.model_version
    run = registry.client.get_run(registered.mlflow_run_id)
    assert run.info.status == "FINISHED"
    assert run.info.artifact_uri.startswith("mlflow-artifacts:")  # proxied by the server
    # the adapter went up through the server and comes back byte for byte
    adapter = registry.download_adapter("uploaded", registered.model_version, tmp_path / "down")
    for name in ("adapter_config.json", "adapter_model.safetensors"):
        assert (adapter / name).read_bytes() == (tmp_path / "adapter" / name).read_bytes()
    # the training set is a dataset of the run whose source the server hands back
    (dataset,) = [i.dataset for i in run.inputs.dataset_inputs]
    assert dataset.source_type == "http"
    source = json.loads(dataset.source)["url"]
    assert source.startswith(f"{server}/api/2.0/mlflow-artifacts/artifacts/")
    assert httpx.get(source).text == (tmp_path / "training" / "sft.jsonl").read_text()
    text = registry.client.download_artifacts(registered.mlflow_run_id, "report.md", tmp_path)
    assert Path(text).read_text().strip()


def test_a_night_killed_while_registering_resumes_without_duplicates(server, tmp_path, monkeypatch):
    settings = settings_on(server, tmp_path / "state", "resumed")
    registry = Registry(settings.mlflow)
    rt = Runtime(settings, registry=registry)
    night_report = replace(report(0.5), promotion=PASSED)

    def killed(*args, **kwargs):
        raise Killed("between the prompt versions and the model version")

    with monkeypatch.context() as patched:
        patched.setattr(Registry, "register_model_version", killed)
        with pytest.raises(Killed):
            register_versions(rt, "n1", night_report)
    name = registry.prompt_name("instructions")
    assert registry.prompt_version_at_alias(name, CANDIDATE) is None  # no alias moved early
    (crashed,) = registry.client.search_runs([registry.experiment_id])
    assert crashed.info.status == "FAILED"

    first = register_versions(rt, "n1", night_report)
    again = register_versions(rt, "n1", night_report)  # a resume after it all went through

    assert first.mlflow_run_id == again.mlflow_run_id == crashed.info.run_id
    assert registry.client.get_run(first.mlflow_run_id).info.status == "FINISHED"
    assert [int(v.version) for v in registry.client.search_prompt_versions(name)] == [1]
    assert first.prompt_versions == again.prompt_versions == {name: 1}
    assert first.model_version == again.model_version == 1
    assert len(registry.client.search_model_versions("name = 'resumed'")) == 1
    assert registry.get_alias("resumed", CANDIDATE) == 1
    assert registry.prompt_version_at_alias(name, CANDIDATE).version == 1


SIGKILLED_CHILD = """
import os, signal, sys
from dataclasses import replace
from flows.production.gate import PromotionDecision
from flows.night.registration import register_versions
from flows.night.runtime import Runtime
from infra.registry.mlflow_registry import Registry
from tests.e2e.test_mlflow_server import settings_on
from tests.flows.report.test_report import report

settings = settings_on(sys.argv[1], sys.argv[2], "sigkilled")
night = replace(report(0.5), promotion=PromotionDecision(True, "beats production", 0.2, 0.1, 0.3))
Registry.register_model_version = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)
register_versions(Runtime(settings, registry=Registry(settings.mlflow)), "n1", night)
"""


def test_a_night_sigkilled_while_registering_resumes_its_run_on_the_server(server, tmp_path):
    state = tmp_path / "state"
    child = subprocess.run([sys.executable, "-c", SIGKILLED_CHILD, server, str(state)], timeout=300)
    assert child.returncode == -signal.SIGKILL
    settings = settings_on(server, state, "sigkilled")
    registry = Registry(settings.mlflow)
    (left,) = registry.client.search_runs([registry.experiment_id])
    assert left.info.status == "RUNNING"  # the server keeps it open: nothing could end it

    night_report = replace(report(0.5), promotion=PASSED)
    resumed = register_versions(Runtime(settings, registry=registry), "n1", night_report)
    assert resumed.mlflow_run_id == left.info.run_id
    assert registry.client.get_run(left.info.run_id).info.status == "FINISHED"
    name = registry.prompt_name("instructions")
    assert [int(v.version) for v in registry.client.search_prompt_versions(name)] == [1]
    assert resumed.model_version == 1 and registry.get_alias("sigkilled", CANDIDATE) == 1


def test_promote_refuse_and_roll_back_through_the_server(server, tmp_path):
    # `night` and `promote` (tests.flows.production.test_promotion) use the model "agent"
    registry = Registry(settings_on(server, tmp_path / "state", "agent").mlflow)
    v1 = night(registry, "n1", gain_over(None, 12))
    first = promote(registry, "agent", None, CFG, "ada")  # the candidate
    assert (first.action, first.version) == ("promoted", v1)
    assert registry.get_alias("agent", PRODUCTION) == v1

    v2 = night(registry, "n2", gain_over(v1, 1))  # one lucky example
    refused = promote(registry, "agent", v2, CFG, "bob")
    assert refused.action == "refused" and registry.get_alias("agent", PRODUCTION) == v1

    v3 = night(registry, "n3", gain_over(v1, 10))
    assert promote(registry, "agent", v3, CFG, "cy").action == "promoted"
    production = registry.prompt_name("instructions")
    assert registry.prompt_at_alias(production, PRODUCTION) == "instructions of n3"

    back = asyncio.run(serving.rollback(None, registry, "agent", "dee"))
    assert (back.action, back.version, back.previous) == ("rolled back", v1, v3)
    assert registry.get_alias("agent", PRODUCTION) == v1
    assert registry.prompt_at_alias(production, PRODUCTION) == "instructions of n1"
    moves = [(m["action"], m["version"]) for m in history(registry, "agent")]
    assert moves == [("promoted", v1), ("promoted", v3), ("rolled back", v1)]


USER, PASSWORD = "flywheel", "s3cret-pw"


def basic_auth_proxy(upstream: str) -> Starlette:
    """The server behind a proxy that wants basic authentication (how a shared tracking
    server is usually exposed): 401 without the right credentials, else the request
    passed on as it came."""
    expected = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    client = httpx.AsyncClient(base_url=upstream, timeout=60)
    hop_by_hop = {"host", "content-length", "transfer-encoding", "connection", "authorization"}

    async def forward(request: Request) -> Response:
        if request.headers.get("authorization") != expected:
            return Response("credentials, please", 401, {"WWW-Authenticate": "Basic"})
        answer = await client.request(
            request.method,
            request.url.path,
            params=request.query_params,
            content=await request.body(),
            headers={k: v for k, v in request.headers.items() if k not in hop_by_hop},
        )
        headers = {
            k: v
            for k, v in answer.headers.items()
            if k not in hop_by_hop and k != "content-encoding"  # httpx decoded the body
        }
        return Response(answer.content, answer.status_code, headers)

    methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"]
    return Starlette(routes=[Route("/{path:path}", forward, methods=methods)])


@pytest.fixture(scope="module")
def guarded(server) -> Iterator[str]:
    """The URL of the server behind `basic_auth_proxy`."""
    with on_loopback(basic_auth_proxy(server)) as url:
        yield url.removesuffix("/v1")  # on_loopback names an OpenAI-style base URL


def test_a_guarded_server_refuses_a_registry_without_credentials(guarded, tmp_path):
    with pytest.raises(RegistryError, match="cannot be opened"):
        Registry(settings_on(guarded, tmp_path / "state", "refused").mlflow)


def test_mlflow_s_credentials_from_the_environment_reach_a_guarded_server(
    guarded, tmp_path, monkeypatch
):
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", USER)
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", PASSWORD)
    settings = settings_on(guarded, tmp_path / "state", "guarded")
    registry = Registry(settings.mlflow)
    night_report = with_adapter_and_training_set(replace(report(0.5), promotion=PASSED), tmp_path)

    registered = register_versions(Runtime(settings, registry=registry), "n1", night_report)

    assert registry.get_alias("guarded", CANDIDATE) == registered.model_version
    adapter = registry.download_adapter("guarded", registered.model_version, tmp_path / "down")
    assert (adapter / "adapter_config.json").read_text() == '{"r": 8}'


def test_credentials_in_the_tracking_uri_work_and_stay_out_of_what_is_stored(guarded, tmp_path):
    uri = guarded.replace("http://", f"http://{USER}:{PASSWORD}@")
    settings = settings_on(uri, tmp_path / "state", "in-uri")
    registry = Registry(settings.mlflow)
    night_report = with_adapter_and_training_set(replace(report(0.5), promotion=PASSED), tmp_path)

    registered = register_versions(Runtime(settings, registry=registry), "n1", night_report)

    assert PASSWORD not in registered.tracking_uri  # the night's report shows it
    run = registry.client.get_run(registered.mlflow_run_id)
    (dataset,) = [i.dataset for i in run.inputs.dataset_inputs]
    assert PASSWORD not in dataset.source and USER not in dataset.source
    assert PASSWORD not in str(run.data.params)
    adapter = registry.download_adapter("in-uri", registered.model_version, tmp_path / "down")
    assert (adapter / "adapter_config.json").read_text() == '{"r": 8}'
