"""The one seam between flywheel and MLflow: runs, metrics, prompt and model versions.

Built from its own settings (`infra.settings.MlflowSettings`, which `Settings.mlflow`
assembles). By default the store is sqlite in the state folder with artifacts next to it,
so it runs offline; a tracking server URI works the same way.

A registry changes nothing process-wide when it is built: its `MlflowClient` is bound to
its own store. For what only MLflow's module-level ("fluent") API does (a run's
lifecycle, `log_model`, `log_input`, reading artifacts by URI), and for what MLflow reads
only from the environment (the HTTP timeout and retries, read on each request), the
registry sets MLflow's state for the duration of the call or the run block and then puts
it back (`Registry.fluent`, `Registry._http`), so two registries in one process each write
to their own store. The scopes save and restore process state: use MLflow from one thread
at a time while they are open.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit
from urllib.request import url2pathname

import mlflow
from mlflow import MlflowClient
from mlflow.data.dataset_source_registry import resolve_dataset_source
from mlflow.data.meta_dataset import MetaDataset
from mlflow.entities import Metric, Param, RunTag
from mlflow.entities.model_registry import PromptVersion
from mlflow.exceptions import MlflowException
from mlflow.prompt.constants import PROMPT_NAME_RULE
from mlflow.store.artifact.mlflow_artifacts_repo import MlflowArtifactsRepository
from mlflow.tracking import artifact_utils
from mlflow.tracking._model_registry import utils as registry_uri_state
from mlflow.tracking._tracking_service import utils as tracking_uri_state
from pydantic import BaseModel, SecretStr

from infra.errors import UserFacingError
from infra.redaction import mask
from infra.registry import bundle_model
from infra.settings import MlflowSettings

PROMPT_NAME_CHARS = "letters, digits, '_', '-' and '.'"  # MLflow's PROMPT_NAME_RULE
CANDIDATE = "candidate"
# The bundle model needs MLflow only; an explicit list skips MLflow's slow inference.
BUNDLE_REQUIREMENTS = [f"mlflow=={mlflow.__version__}"]
_SECRET_WORDS = ("api_key", "secret", "password", "token")
# MLflow reads these on every request to a server (its own retries have backoff)
_TIMEOUT_ENV, _RETRIES_ENV = "MLFLOW_HTTP_REQUEST_TIMEOUT", "MLFLOW_HTTP_REQUEST_MAX_RETRIES"
# set_tracking_uri / set_registry_uri also write these, for subprocesses
_URI_ENV = ("MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI")
_LOCAL_SCHEMES = ("sqlite", "file", "")


class RegistryError(UserFacingError):
    """The registry cannot be used; the message says how to fix it."""


@dataclass(frozen=True)
class ModelVersionInfo:
    """One registered model version as stored."""

    name: str
    version: int
    run_id: str | None
    tags: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RunInfo:
    """A finished or running MLflow run, as `flywheel status` lists it."""

    run_id: str
    name: str
    status: str
    start_time: int  # ms since the epoch
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class RegisteredPrompt:
    """One prompt version as stored: its text and the tags it was registered with."""

    name: str
    version: int
    template: str
    tags: dict[str, str] = field(default_factory=dict)


class Registry:
    """One MLflow store, from its own settings (`Settings.mlflow` builds them); building it
    sets nothing process-wide."""

    def __init__(self, settings: MlflowSettings):
        if not isinstance(settings, MlflowSettings):  # the whole Settings, as before
            raise TypeError(
                f"Registry takes the registry's own settings, not {type(settings).__name__}: "
                "Registry(settings.mlflow)"
            )
        self.settings = settings
        self.tracking_uri = settings.tracking_uri
        self._open_runs: list[str] = []  # this registry's runs now active, innermost last
        try:
            if urlsplit(self.tracking_uri).scheme in _LOCAL_SCHEMES:
                _make_local_store(self.tracking_uri, settings.artifact_location)
            self.client = MlflowClient(
                tracking_uri=self.tracking_uri, registry_uri=self.tracking_uri
            )
            with self._http():
                experiment = self.client.get_experiment_by_name(settings.experiment)
                if experiment and experiment.lifecycle_stage == "deleted":
                    raise RegistryError(
                        f"The MLflow experiment {experiment.name!r} is deleted: restore it "
                        "with `mlflow experiments restore`, or set "
                        "FLYWHEEL_REGISTRY__EXPERIMENT."
                    )
                self.experiment_id = (
                    experiment.experiment_id
                    if experiment
                    else self.client.create_experiment(
                        settings.experiment, artifact_location=settings.artifact_location
                    )
                )
        except RegistryError:
            raise
        except Exception as e:  # sqlalchemy, OSError, MlflowException: all mean the same here
            raise RegistryError(
                f"The MLflow store at {mask(self.tracking_uri)} cannot be opened "
                f"({type(e).__name__}): make FLYWHEEL_STATE_DIR a writable folder, or set "
                "FLYWHEEL_REGISTRY__TRACKING_URI to a reachable MLflow server."
            ) from e

    # Where MLflow reads its process-wide state, set for one call or block

    @contextmanager
    def _http(self) -> Iterator[None]:
        """MLflow's HTTP timeout and retries (environment only, read on every request to a
        server) set to this registry's for the block, then put back."""
        knobs = self.settings
        with _environ({_TIMEOUT_ENV: str(knobs.timeout_s), _RETRIES_ENV: str(knobs.max_retries)}):
            yield

    @contextmanager
    def fluent(self) -> Iterator[None]:
        """MLflow's module-level API (`mlflow.start_run`, `mlflow.pyfunc.load_model`...)
        pointed at this store for the block (tracking and registry URI, and `_http`'s
        knobs), then back at whatever it pointed at: for what the client cannot do (a run's
        lifecycle, log_model, log_input, reading artifacts by URI)."""
        # What was set, not what it resolves to (an unset URI stays unset): MLflow's own
        # `_use_tracking_uri` reads the same module state.
        tracking, registry = tracking_uri_state._tracking_uri, registry_uri_state._registry_uri
        # set_*_uri also write MLFLOW_*_URI (for subprocesses): _environ puts them back last
        with self._http(), _environ({}, keep=_URI_ENV):
            mlflow.set_tracking_uri(self.tracking_uri)
            mlflow.set_registry_uri(self.tracking_uri)
            try:
                yield
            finally:
                mlflow.set_tracking_uri(tracking)
                mlflow.set_registry_uri(registry)

    # Runs and what goes into them

    @contextmanager
    def start_run(
        self, name: str, tags: dict[str, str] | None = None
    ) -> Iterator[mlflow.ActiveRun]:
        """A run in the flywheel experiment; nested when another run is already active.
        MLflow's module-level API points at this store until the block ends."""
        with self.fluent():
            nested = mlflow.active_run() is not None
            with (
                mlflow.start_run(
                    experiment_id=self.experiment_id, run_name=name, tags=tags, nested=nested
                ) as run,
                self._open(run),
            ):
                yield run

    @contextmanager
    def start_or_resume_run(self, name: str, tags: dict[str, str]) -> Iterator[mlflow.ActiveRun]:
        """The run named `name` with these tags if one exists (a night killed while it
        registered left it RUNNING), else a new one. It ends FINISHED, or FAILED when the
        block raises."""
        found = self.find_run(name, tags)
        if found is None:
            with self.start_run(name, tags) as run:
                yield run
        else:
            with self.reopen_run(found) as run:
                yield run

    def find_run(self, name: str, tags: dict[str, str]) -> str | None:
        """The id of the newest run in the experiment named `name` with all these tags."""
        conditions = [f"attributes.run_name = '{_quoted(name)}'"]
        conditions += [f"tags.`{key}` = '{_quoted(value)}'" for key, value in tags.items()]
        with self._http():
            runs = self.client.search_runs(
                [self.experiment_id],
                filter_string=" and ".join(conditions),
                order_by=["attributes.start_time DESC"],
                max_results=1,
            )
        return runs[0].info.run_id if runs else None

    @contextmanager
    def reopen_run(self, run_id: str) -> Iterator[mlflow.ActiveRun]:
        """A finished run made active again, to add what was measured after it closed."""
        with self.fluent(), mlflow.start_run(run_id=run_id) as run, self._open(run):
            yield run

    @contextmanager
    def _open(self, run: mlflow.ActiveRun) -> Iterator[None]:
        self._open_runs.append(run.info.run_id)
        try:
            yield
        finally:
            self._open_runs.remove(run.info.run_id)

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        # fluent: it links a metric to the models logged in the run at its step
        with self.fluent():
            mlflow.log_metrics(metrics, step=step, run_id=_active_run_id())

    def log_metric_history(self, history: Sequence[tuple[int, Mapping[str, float]]]) -> None:
        """Metrics at steps (a training curve: per optimizer step its loss, learning rate,
        ...) into the active run, in one request per 1000 values (MLflow's batch limit)
        rather than one per value."""
        run_id, now = _active_run_id(), int(time.time() * 1000)
        metrics = [
            Metric(key, float(value), now, int(step))
            for step, values in history
            for key, value in values.items()
        ]
        for start in range(0, len(metrics), 1000):
            self.client.log_batch(run_id, metrics=metrics[start : start + 1000])

    def log_params(self, params: dict[str, Any]) -> None:
        secret = [key for key, value in params.items() if isinstance(value, SecretStr)]
        if secret:
            raise ValueError(f"secrets must not be logged to MLflow: {', '.join(secret)}")
        run_id = _active_run_id()
        with self._http():
            self.client.log_batch(run_id, params=[Param(k, str(v)) for k, v in params.items()])

    def set_tags(self, tags: dict[str, str]) -> None:
        """Tags of the active run: unlike a param, a tag may take a new value later."""
        run_id = _active_run_id()
        with self._http():
            self.client.log_batch(run_id, tags=[RunTag(k, v) for k, v in tags.items()])

    def log_dict(self, data: dict[str, Any], artifact_file: str) -> None:
        run_id = _active_run_id()
        with self._http():
            self.client.log_dict(run_id, data, artifact_file)

    def log_table(self, rows: list[dict[str, Any]], artifact_file: str) -> None:
        """Rows of one shape as a table of the active run (the MLflow UI shows it)."""
        columns = {key: [row[key] for row in rows] for key in rows[0]} if rows else {}
        run_id = _active_run_id()
        with self._http():
            self.client.log_table(run_id, columns, artifact_file)

    def log_figure(self, figure: Any, artifact_file: str) -> None:
        """A matplotlib figure as an image of the active run."""
        run_id = _active_run_id()
        with self._http():
            self.client.log_figure(run_id, figure, artifact_file)

    def log_text(self, text: str, artifact_file: str) -> None:
        run_id = _active_run_id()
        with self._http():
            self.client.log_text(run_id, text, artifact_file)

    def log_evaluation(
        self,
        name: str,
        tags: dict[str, str],
        rows: list[dict[str, Any]],
        scores: Mapping[str, float],
        scorer_name: str,
    ) -> str:
        """An MLflow evaluation run named `name`, a child of the active run: each row
        (`{"inputs": {"id", ...}, "outputs": reply}`) through `mlflow.genai.evaluate`, with
        the score already measured for its id as the scorer `scorer_name` (nothing is
        judged again). MLflow's UI shows it as an evaluation: a trace per row, its score,
        the mean. Returns the run's id."""
        from mlflow.genai.scorers import scorer

        @scorer(name=scorer_name)
        def measured(inputs: dict[str, Any], outputs: Any) -> float:
            return float(scores[inputs["id"]])

        # MLflow's default of ten evaluation workers, each writing a trace, exhausts the
        # tracking store's connection pool (sqlite: 30 s timeouts, traces lost); with two,
        # 140 rows take 11 s instead of 270 s. A value the user set is kept.
        workers = {_EVAL_WORKERS: os.environ.get(_EVAL_WORKERS, "2")}
        with (
            self.start_run(name, tags) as run,
            _environ(workers),
            redirect_stdout(io.StringIO()),  # its banner and progress bar: not the night's
            redirect_stderr(io.StringIO()),  # (its warnings go through logging, kept)
        ):
            mlflow.genai.evaluate(data=rows, scorers=[measured])
            return run.info.run_id

    def log_training_set(self, path: Path, name: str, tags: dict[str, str]) -> str:
        """A training set as an input of the active run: the file as an artifact under
        `training/<name>/`, and a dataset named `name` whose digest is the file's content hash
        and whose tags say where it came from (the MLflow UI lists it under the run's
        datasets). Logged again with the same content, it is the same dataset. Returns
        the digest."""
        run_id = _active_run_id()
        folder = f"training/{name}"  # a night's steps each have their sft.jsonl
        digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
        with self.fluent():  # log_input: the client's log_inputs wants MLflow's entities
            self.client.log_artifact(run_id, str(path), folder)
            uri = _dataset_uri(
                artifact_utils.get_artifact_uri(
                    run_id, f"{folder}/{path.name}", tracking_uri=self.tracking_uri
                ),
                self.tracking_uri,
            )
            with warnings.catch_warnings():  # "can be interpreted in multiple ways": two
                warnings.simplefilter("ignore", UserWarning)  # registered sources, one class
                source = resolve_dataset_source(uri)
            dataset = MetaDataset(source, name=name, digest=digest)
            mlflow.log_input(dataset, context="training", tags=tags)
        return digest

    # Prompts: one registered prompt per agent component

    def prompt_name(self, component: str) -> str:
        """The registered prompt that holds one component, e.g. `agent-system`."""
        return f"{self.settings.prompt_name}-{component}"

    def register_prompt(
        self,
        name: str,
        template: str,
        commit_message: str = "",
        tags: dict[str, str] | None = None,
    ) -> int:
        _check_prompt_name(name)
        # A copy: MLflow adds its prompt marker to the dict it is given, and a caller that
        # reuses the dict for a model version would then be refused ("Prompts cannot be
        # registered as models").
        with self._http():
            version = self.client.register_prompt(
                name=name,
                template=template,
                commit_message=commit_message or None,
                tags=dict(tags or {}),
            )
        return int(version.version)

    def find_prompt_version(self, name: str, template: str, tags: dict[str, str]) -> int | None:
        """The version of prompt `name` with this text and all these tags (what a killed
        night already registered), or None."""
        versions, token = [], None
        try:
            with self._http():
                while True:
                    page = self.client.search_prompt_versions(name, page_token=token)
                    versions += list(page)
                    token = page.token
                    if not token:
                        break
        except MlflowException as e:
            if e.error_code == "RESOURCE_DOES_NOT_EXIST":
                return None
            raise
        for version in versions:
            found = dict(version.tags or {})
            if version.template == template and all(found.get(k) == v for k, v in tags.items()):
                return int(version.version)
        return None

    def set_prompt_alias(self, name: str, alias: str, version: int) -> None:
        with self._http():
            self.client.set_prompt_alias(name, alias=alias, version=int(version))

    def delete_prompt_alias(self, name: str, alias: str) -> None:
        """Take `alias` off the prompt; one it does not hold is no error (a redo)."""
        try:
            with self._http():
                self.client.delete_prompt_alias(name, alias)
        except MlflowException as e:
            if e.error_code != "RESOURCE_DOES_NOT_EXIST":
                raise

    def load_prompt(self, uri: str) -> str:
        """The template behind `prompts:/name/3` or `prompts:/name@alias`."""
        return self._prompt(uri).template

    def prompt_at_alias(self, name: str, alias: str) -> str | None:
        """The template `alias` points to, or None when the prompt or alias does not exist."""
        found = self.prompt_version_at_alias(name, alias)
        return found.template if found else None

    def prompt_version_at_alias(self, name: str, alias: str) -> RegisteredPrompt | None:
        """The version `alias` points to, with its tags; None when there is none."""
        try:
            prompt = self._prompt(f"prompts:/{name}@{alias}")
        except MlflowException:
            return None
        return RegisteredPrompt(
            prompt.name, int(prompt.version), prompt.template, dict(prompt.tags or {})
        )

    def _prompt(self, uri: str) -> PromptVersion:
        # MLflow caches alias lookups for 60 s and clears them only for changes made by this
        # process: a promotion by another one would stay hidden. Linking prompts to a model
        # is log_model's job, not a read's; read inside one of this registry's runs, the
        # prompt is linked to the run (what mlflow.genai.load_prompt does with any run).
        with self._http():
            prompt = self.client.load_prompt(uri, cache_ttl_seconds=0)
            run = mlflow.active_run()
            if run is not None and run.info.run_id in self._open_runs:
                self.client.link_prompt_version_to_run(run.info.run_id, prompt)
        return prompt

    # Model versions: the prompts plus, after a LoRA round, the adapter

    def register_model_version(
        self,
        name: str,
        adapter_dir: str | Path | None,
        prompt_uris: list[str],
        metrics: dict[str, float],
        tags: dict[str, str] | None = None,
        alias: str | None = CANDIDATE,
    ) -> int:
        """Log the version as a model in the active run, register it, and point `alias` at
        it (None: no alias)."""
        run_id = _active_run_id()
        if adapter_dir is not None and not (Path(adapter_dir) / "adapter_config.json").is_file():
            raise RegistryError(f"{adapter_dir} holds no adapter_config.json: it is no adapter.")
        prefix = f"{self.settings.prompt_name}-"
        prompts = {}
        for uri in prompt_uris:
            prompt = self._prompt(uri)
            prompts[prompt.name.removeprefix(prefix)] = prompt.template
        with self.fluent(), tempfile.TemporaryDirectory() as tmp:
            prompts_file = Path(tmp) / "prompts.json"
            prompts_file.write_text(json.dumps(prompts, indent=2, sort_keys=True))
            artifacts = {bundle_model.PROMPTS: str(prompts_file)}
            if adapter_dir is not None:
                artifacts[bundle_model.ADAPTER] = str(adapter_dir)
            info = mlflow.pyfunc.log_model(
                name=name,
                python_model=bundle_model.__file__,
                artifacts=artifacts,
                prompts=prompt_uris,
                pip_requirements=BUNDLE_REQUIREMENTS,
                registered_model_name=name,
                tags=tags,
            )
            mlflow.log_metrics(metrics, run_id=run_id, model_id=info.model_id)
        version = int(info.registered_model_version)
        if alias:
            self.set_model_alias(name, alias, version)
        return version

    def find_model_version(self, name: str, tags: dict[str, str]) -> int | None:
        """The newest version of model `name` with all these tags, or None."""
        with self._http():
            versions = self.client.search_model_versions(f"name = '{_quoted(name)}'")
        matching = [
            int(v.version)
            for v in versions
            if all((v.tags or {}).get(key) == value for key, value in tags.items())
        ]
        return max(matching, default=None)

    def set_model_alias(self, name: str, alias: str, version: int) -> None:
        with self._http():
            self.client.set_registered_model_alias(name, alias, str(version))

    def delete_model_alias(self, name: str, alias: str) -> None:
        """Take `alias` off the model; one it does not hold is no error (a redo)."""
        if self.get_alias(name, alias) is None:
            return
        with self._http():
            self.client.delete_registered_model_alias(name, alias)

    def model_version(self, name: str, version: int) -> ModelVersionInfo | None:
        """The version with its tags and aliases; None when it does not exist."""
        try:
            with self._http():
                found = self.client.get_model_version(name, str(version))
        except MlflowException as e:
            if e.error_code == "RESOURCE_DOES_NOT_EXIST":
                return None
            raise
        return ModelVersionInfo(
            found.name,
            int(found.version),
            found.run_id,
            dict(found.tags or {}),
        )

    def set_model_version_tags(self, name: str, version: int, tags: dict[str, str]) -> None:
        with self._http():
            for key, value in tags.items():
                self.client.set_model_version_tag(name, str(version), key, value)

    def model_tag(self, name: str, key: str) -> str | None:
        """A tag of the registered model itself (not of a version); None when unset."""
        try:
            with self._http():
                return self.client.get_registered_model(name).tags.get(key)
        except MlflowException as e:
            if e.error_code == "RESOURCE_DOES_NOT_EXIST":
                return None
            raise

    def set_model_tag(self, name: str, key: str, value: str) -> None:
        with self._http():
            self.client.set_registered_model_tag(name, key, value)

    def delete_model_tag(self, name: str, key: str) -> None:
        with self._http():
            self.client.delete_registered_model_tag(name, key)

    def load_run_dict(self, run_id: str, artifact_file: str) -> dict[str, Any] | None:
        """A JSON artifact of a run; None when the run has no such file."""
        try:
            with self.fluent():
                return mlflow.artifacts.load_dict(f"runs:/{run_id}/{artifact_file}")
        except (MlflowException, OSError):
            return None

    def log_folder(self, run_name: str, tags: dict[str, str], folder: Path, path: str) -> str:
        """`folder` as the artifacts under `path` of the run named `run_name` with `tags`
        (the one a killed night left, else a new one); their `runs:/` URI."""
        with self.start_or_resume_run(run_name, tags) as run:
            self.client.log_artifacts(run.info.run_id, str(folder), path)
            return f"runs:/{run.info.run_id}/{path}"

    def download(self, uri: str, dst: Path) -> Path:
        """A local copy, under `dst`, of the artifacts at `uri`."""
        dst.mkdir(parents=True, exist_ok=True)
        with self.fluent():  # a models:/ URI is resolved in the registry
            return Path(mlflow.artifacts.download_artifacts(uri, dst_path=str(dst)))

    def download_adapter(self, name: str, version: int, dst: Path) -> Path | None:
        """A local copy (under `dst`) of the LoRA adapter a model version holds; None for a
        prompts-only version."""
        with self.fluent():
            source = self.client.get_model_version(name, str(version)).source
            local = Path(mlflow.artifacts.download_artifacts(source, dst_path=str(dst)))
        found = sorted(p.parent for p in (local / "artifacts").rglob("adapter_config.json"))
        return found[0] if found else None

    def recent_runs(self, limit: int, name_prefix: str = "") -> list[RunInfo]:
        """The experiment's newest runs named `name_prefix`..., newest first. The prefix is
        in the query, so that the child runs of a night (its training curves) or the moves
        between nights take none of the `limit` places."""
        where = f"attributes.run_name LIKE '{_quoted(name_prefix)}%'" if name_prefix else ""
        with self._http():
            runs = self.client.search_runs(
                [self.experiment_id],
                filter_string=where,
                order_by=["attributes.start_time DESC"],
                max_results=limit,
            )
        return [
            RunInfo(
                run.info.run_id,
                run.info.run_name or "",
                run.info.status,
                run.info.start_time,
                dict(run.data.metrics),
            )
            for run in runs
        ]

    def get_alias(self, name: str, alias: str) -> int | None:
        """The model version that `alias` points to, or None when it points nowhere yet."""
        try:
            with self._http():
                model = self.client.get_registered_model(name)
        except MlflowException as e:
            if e.error_code == "RESOURCE_DOES_NOT_EXIST":
                return None
            raise
        # Read the alias map: a missing alias has no error code of its own across stores.
        version = model.aliases.get(alias)
        return int(version) if version is not None else None


def safe_params(settings: BaseModel) -> dict[str, str]:
    """Settings flattened to `stage.knob -> value` for log_params, with every secret left out."""
    flat: dict[str, str] = {}

    def walk(value: Any, key: str) -> None:
        if isinstance(value, SecretStr) or any(w in key.lower() for w in _SECRET_WORDS):
            return
        if isinstance(value, BaseModel):
            for field in type(value).model_fields:
                walk(getattr(value, field), f"{key}.{field}" if key else field)
        else:
            flat[key] = mask(str(value))  # a password in a URL, a key in a query

    walk(settings, "")
    return flat


_EVAL_WORKERS = "MLFLOW_GENAI_EVAL_MAX_WORKERS"


@contextmanager
def _environ(values: dict[str, str], keep: tuple[str, ...] = ()) -> Iterator[None]:
    """The environment with `values` set for the block; afterwards these and the `keep`
    variables are as they were before (set to the same value, or unset)."""
    saved = {key: os.environ.get(key) for key in (*values, *keep)}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _quoted(value: str) -> str:
    """A value inside an MLflow filter string's single quotes."""
    return value.replace("\\", "\\\\").replace("'", "\\'")


def _dataset_uri(artifact_uri: str, tracking_uri: str) -> str:
    """Where a dataset logged as an artifact can be read back. A server that proxies its
    artifacts names them `mlflow-artifacts:/...`, a scheme MLflow has no dataset source
    for: its HTTP address on the server stands in, without the user and password a
    tracking URI may carry (the dataset's source is stored and shown as is)."""
    if urlsplit(artifact_uri).scheme != "mlflow-artifacts":
        return artifact_uri
    url = urlsplit(MlflowArtifactsRepository.resolve_uri(artifact_uri, tracking_uri))
    return urlunsplit(url._replace(netloc=url.netloc.rpartition("@")[2]))


def _active_run_id() -> str:
    run = mlflow.active_run()
    if run is None:
        raise RegistryError("No MLflow run is active: log inside `with registry.start_run(...)`.")
    return run.info.run_id


def _check_prompt_name(name: str) -> None:
    if not PROMPT_NAME_RULE.match(name):
        raise RegistryError(
            f"{name!r} is not a valid MLflow prompt name: use only {PROMPT_NAME_CHARS}."
        )


def _make_local_store(tracking_uri: str, artifact_location: str | None) -> None:
    """Create the folders sqlite and the artifact store need; sqlite creates no folders."""
    folders = []
    if artifact_location and urlsplit(artifact_location).scheme == "file":
        folders.append(Path(url2pathname(urlsplit(artifact_location).path)).parent)
    if tracking_uri.startswith("sqlite:///"):
        folders.append(Path(tracking_uri.removeprefix("sqlite:///")).parent)
    for folder in folders:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise RegistryError(
                f"Cannot create {folder} for the MLflow store ({e.strerror}): set "
                "FLYWHEEL_STATE_DIR to a writable folder."
            ) from e
        if not os.access(folder, os.W_OK):
            raise RegistryError(
                f"{folder} is not writable: set FLYWHEEL_STATE_DIR to a writable folder."
            )
