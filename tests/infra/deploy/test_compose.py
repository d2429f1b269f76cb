"""The production stack (infra/deploy/docker-compose.yml) as `docker compose` would read
it: valid against the compose-spec schema, every image pinned, vLLM able to load the
adapters flywheel trains from the volume flywheel writes them to, MLflow able to open its
database, a Prefect worker on the deployment's pool, and flywheel's settings loading from
the worker's environment. No Docker engine is needed; where a `docker compose` binary is
present, its own `config` check runs too."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from jsonschema import Draft202012Validator

ROOT = Path(__file__).resolve().parents[3]
DEPLOY = ROOT / "infra" / "deploy"
COMPOSE = DEPLOY / "docker-compose.yml"
SCHEMA = DEPLOY / "compose-spec.schema.json"
WORKER = "flywheel-worker"
VLLM = "vllm"

# What the operator exports before `docker compose up` (the ${VAR:?...} in the file).
HOST_ENV = {
    "LANGFUSE_PUBLIC_KEY": "pk-lf-test",
    "LANGFUSE_SECRET_KEY": "sk-lf-test",
    "LANGFUSE_HOST": "http://host.docker.internal:3000",
}
# Numeric parts of an exact version, by image; anything else needs three (x.y.z).
# PostgreSQL numbers its releases major.minor since 10: `16.15` is one release, `16` moves.
EXACT_PARTS = {"postgres": 2}


def _compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def _interpolate(value: str, env: dict[str, str]) -> str:
    """Compose's ${VAR}, ${VAR:-default}, ${VAR:?error} and $$, for the forms this file uses."""

    def one(match: re.Match) -> str:
        name, op, arg = match.group(1), match.group(2), match.group(3)
        if env.get(name):
            return env[name]
        if op == ":?":
            raise AssertionError(f"${{{name}}} is required: {arg}")
        return arg if op == ":-" else ""

    value = re.sub(r"\$\{(\w+)(?:(:[-?])([^}]*))?\}", one, value)
    return value.replace("$$", "$")


def _environment(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {key: _interpolate(str(value), HOST_ENV) for key, value in env.items()}


def _args(service: dict) -> list[str]:
    command = service.get("command") or []
    return shlex.split(command) if isinstance(command, str) else list(command)


def _mounts(service: dict) -> list[tuple[str, str, bool]]:
    """(source, target, read_only) of each volume, short or long syntax."""
    mounts = []
    for volume in service.get("volumes") or []:
        if isinstance(volume, str):
            source, target, *mode = volume.split(":")
            mounts.append((source, target, "ro" in (mode[0].split(",") if mode else [])))
        else:
            mounts.append((volume["source"], volume["target"], bool(volume.get("read_only"))))
    return mounts


def _unpinned(reference: str) -> str | None:
    """Why an image reference is not an exact release, or None when it is."""
    if "@sha256:" in reference:
        return None
    name, _, tag = reference.rpartition(":")
    if not name or "/" in tag:
        return "no tag (Docker pulls `latest`)"
    repository = name.rsplit("/", 1)[-1]
    parts = EXACT_PARTS.get(repository, 3)
    if not re.match(r"v?" + r"\.".join([r"\d+"] * parts) + r"(?![.\d])", tag):
        return f"tag {tag!r} is not an exact release ({parts} numbers)"
    return None


def _dockerfile(service: dict) -> Path:
    build = service["build"]
    build = {"context": build} if isinstance(build, str) else build
    context = (COMPOSE.parent / build.get("context", ".")).resolve()
    return context / build.get("dockerfile", "Dockerfile")


def _from_images(dockerfile: Path) -> list[str]:
    images, stages = [], set()
    for line in dockerfile.read_text().splitlines():
        words = [w for w in line.split() if not w.startswith("--")]
        if words and words[0].upper() == "FROM":
            if words[1] not in stages:
                images.append(words[1])
            if len(words) >= 4 and words[2].upper() == "AS":
                stages.add(words[3])
    return images


def test_the_compose_file_is_valid_against_the_compose_spec():
    schema = json.loads(SCHEMA.read_text())
    Draft202012Validator.check_schema(schema)
    errors = sorted(Draft202012Validator(schema).iter_errors(_compose()), key=str)
    assert not errors, "\n".join(
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors
    )


def test_docker_compose_config_accepts_it(tmp_path):
    for command in (["docker", "compose"], ["docker-compose"]):
        if shutil.which(command[0]):
            version = subprocess.run([*command, "version"], capture_output=True, text=True)
            # Compose 1.x (Debian bookworm's docker-compose) predates the Compose
            # Specification this file follows: it wants a `version:` key
            if version.returncode == 0 and not re.search(r"version v?1\.", version.stdout):
                break
    else:
        pytest.skip("no Compose v2 here (the schema test above stands in for it)")
    result = subprocess.run(
        [*command, "-f", str(COMPOSE), "config", "-q"],
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"], "HOME": str(tmp_path), **HOST_ENV},
    )
    assert result.returncode == 0, result.stderr


def test_every_image_is_an_exact_release_and_every_build_starts_from_one():
    services = _compose()["services"]
    for name, service in services.items():
        assert "image" in service or "build" in service, name
        if "image" in service:
            assert _unpinned(service["image"]) is None, (name, _unpinned(service["image"]))
        if "build" in service:
            dockerfile = _dockerfile(service)
            assert dockerfile.is_file(), f"{name}: {dockerfile} does not exist"
            images = _from_images(dockerfile)
            assert images, f"{dockerfile.name} has no FROM"
            for image in images:
                assert _unpinned(image) is None, (dockerfile.name, image, _unpinned(image))
    assert _unpinned("vllm/vllm-openai:latest") and _unpinned("postgres")
    assert _unpinned("postgres:16") and _unpinned("python:3.11-slim")


def test_server_and_client_releases_match():
    """MLflow's and Prefect's servers run the releases flywheel's clients are pinned to."""
    services = _compose()["services"]
    pins = dict(
        line.split("==") for line in (ROOT / "constraints.txt").read_text().split() if "==" in line
    )
    prefect_yaml = yaml.safe_load((ROOT / "prefect.yaml").read_text())
    assert prefect_yaml["prefect-version"] == pins["prefect"]
    assert services["prefect"]["image"].startswith(f"prefecthq/prefect:{pins['prefect']}-")
    assert _from_images(_dockerfile(services["mlflow"])) == [
        f"ghcr.io/mlflow/mlflow:v{pins['mlflow']}"
    ]


def test_vllm_loads_adapters_of_the_rank_flywheel_trains(monkeypatch, tmp_path):
    from infra.settings import JudgeLoraSettings, LoraSettings

    vllm = _compose()["services"][VLLM]
    args = _args(vllm)
    assert vllm["image"].startswith("vllm/vllm-openai:")
    assert "--enable-lora" in args and "--max-loras" in args
    rank = int(args[args.index("--max-lora-rank") + 1])
    stack = _stack_settings(monkeypatch, tmp_path)
    # vLLM refuses an adapter of a higher rank than --max-lora-rank
    for trained in (LoraSettings().rank, JudgeLoraSettings().rank):
        assert rank >= trained
    assert rank >= stack.lora.rank and rank >= stack.judge.lora.rank
    # /v1/load_lora_adapter exists only with this set
    assert _environment(vllm)["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "true"
    assert args[args.index("--served-model-name") + 1] == stack.lm.model


def test_the_adapter_volume_is_where_the_worker_writes_and_vllm_reads():
    compose = _compose()
    worker, vllm = compose["services"][WORKER], compose["services"][VLLM]
    env = _environment(worker)
    written = [
        (src, ro) for src, dst, ro in _mounts(worker) if dst == env["FLYWHEEL_SERVING__ADAPTER_DIR"]
    ]
    read = [
        src for src, dst, _ in _mounts(vllm) if dst == env["FLYWHEEL_SERVING__SERVER_ADAPTER_DIR"]
    ]
    assert len(written) == 1 and not written[0][1], "the worker must mount it read-write"
    assert read == [written[0][0]], "vLLM must mount the same volume"
    assert written[0][0] in compose["volumes"], "a named volume, not a host path"
    for url in (env["FLYWHEEL_SERVING__BASE_URL"], env["FLYWHEEL_LM__BASE_URL"]):
        assert urlsplit(url).hostname == VLLM and urlsplit(url).port == 8000


def test_mlflow_can_open_its_database_and_answers_the_worker():
    services = _compose()["services"]
    mlflow = services["mlflow"]
    args = _args(mlflow)
    backend = args[args.index("--backend-store-uri") + 1]
    if backend.startswith("postgresql"):
        dockerfile = _dockerfile(mlflow).read_text()
        assert re.search(r"pip install [^\n]*\bpsycopg2?(-binary)?(\[\w+\])?==[\d.]+", dockerfile)
        database = urlsplit(backend).hostname
        assert mlflow["depends_on"][database]["condition"] == "service_healthy"
        assert "pg_isready" in services[database]["healthcheck"]["test"]
    # MLflow 3 answers only the Host headers it allows (localhost and private IPs unless
    # --allowed-hosts says otherwise): the worker's must be among them
    tracking = urlsplit(_environment(services[WORKER])["FLYWHEEL_REGISTRY__TRACKING_URI"])
    assert tracking.hostname == "mlflow"
    allowed = args[args.index("--allowed-hosts") + 1].split(",")
    assert tracking.netloc in allowed


def test_a_prefect_worker_serves_the_deployments_pool():
    services = _compose()["services"]
    prefect_yaml = yaml.safe_load((ROOT / "prefect.yaml").read_text())
    pools = {deployment["work_pool"]["name"] for deployment in prefect_yaml["deployments"]}
    worker = services[WORKER]
    script = " ".join(_args(worker))
    started = re.search(r"prefect worker start --pool (\S+)", script)
    assert started and {started.group(1)} == pools
    assert "prefect --no-prompt deploy --all" in script
    api = urlsplit(_environment(worker)["PREFECT_API_URL"])
    assert "prefect server start" in " ".join(_args(services[api.hostname]))
    assert worker["depends_on"][api.hostname]["condition"] == "service_healthy"
    # prefect.yaml's pull step runs each night from $FLYWHEEL_HOME: the image's copy of
    # the repository, where FLYWHEEL_CONFIG points
    assert "$FLYWHEEL_HOME" in json.dumps(prefect_yaml["pull"])
    dockerfile = _dockerfile(worker).read_text()
    home = re.search(r"FLYWHEEL_HOME=(\S+)", dockerfile).group(1)
    assert re.search(rf"^WORKDIR {home}$", dockerfile, re.M) and "COPY . ." in dockerfile
    config = _environment(worker)["FLYWHEEL_CONFIG"]
    assert (ROOT / Path(config).relative_to(home)).is_file()


def _stack_settings(monkeypatch, tmp_path):
    """Settings as the worker's container builds them: flywheel.toml, then its environment."""
    from infra.settings import Settings

    for key in list(os.environ):
        if key.startswith("FLYWHEEL_"):  # the test session's own (conftest)
            monkeypatch.delenv(key)
    env = _environment(_compose()["services"][WORKER])
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("FLYWHEEL_CONFIG", str(DEPLOY / "flywheel.toml"))
    monkeypatch.setenv("FLYWHEEL_STATE_DIR", str(tmp_path / "state"))
    return Settings()


def test_the_worker_settings_load_with_the_stack_urls(monkeypatch, tmp_path):
    settings = _stack_settings(monkeypatch, tmp_path)
    assert settings.traces.source == "langfuse" and settings.lm.backend == "openai"
    assert settings.registry.tracking_uri == "http://mlflow:5000"
    assert settings.lm.base_url == "http://vllm:8000/v1"
    serving = settings.serving
    assert serving.base_url == "http://vllm:8000/v1"
    assert serving.adapter_dir == serving.server_adapter_dir == "/adapters"


def test_vllm_serves_the_checkpoint_the_worker_trains_adapters_on():
    """An adapter is trained on the worker's copy of the model (the embedded agent,
    converted into its cache); vLLM must serve that copy, from the same volume."""
    from infra.lm.catalogue import AGENT

    services = _compose()["services"]
    args = _args(services[VLLM])
    served = Path(args[args.index("--model") + 1])
    cache = {source: target for source, target, _ in _mounts(services[WORKER])}
    vllm_mounts = {source: target for source, target, _ in _mounts(services[VLLM])}
    shared = [s for s in vllm_mounts if s in cache and served.is_relative_to(vllm_mounts[s])]
    assert shared, f"vLLM's --model {served} is on no volume the worker mounts"
    inside = served.relative_to(vllm_mounts[shared[0]])
    assert cache[shared[0]] == "/root/.cache/flywheel"  # the worker's cache_root()
    assert inside == Path("models") / AGENT.name
    # the checkpoint exists before vLLM starts: model-init converts it, on that volume
    init = services["model-init"]
    assert services[VLLM]["depends_on"]["model-init"]["condition"] == (
        "service_completed_successfully"
    )
    assert (shared[0], "/root/.cache/flywheel", False) in _mounts(init)
